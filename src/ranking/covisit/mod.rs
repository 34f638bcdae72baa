//! Co-visitation, the session-kNN family: which items sessions visit together,
//! learned click by click, scored against a session's recent items. Three parts,
//! each scaled to its maximum, then blended (tuned on a validation slice of the
//! Diginetica training data, see BENCHMARKS.md "Offline evaluation"):
//!
//! 1. **Item-to-item transitions (SR-style, time-decayed).** When click `j`
//!    arrives at position `q` of a session, for each of the previous
//!    `ii_window` clicks `i` of that session (gap `d = q - p`, `i != j`):
//!    ```text
//!    W[i][j] += tw * d^-ii_fwd_pow                      (forward)
//!    W[j][i] += tw * ii_bwd_weight * d^-ii_bwd_pow      (backward)
//!    pop[j]  += tw
//!    ```
//!    with `tw = exp(sid / ii_time_tau)` (`sid` = ordinal of the session in the
//!    stream), i.e. all counts decay with e-folding time `ii_time_tau` sessions.
//!    Scoring uses the last `ii_recent` *distinct* prefix items, the k-th most
//!    recent (k = 0 is the last click) weighted `exp(-k * ii_recency_decay)`:
//!    ```text
//!    A(j) = sum_k exp(-k*ii_recency_decay) * W[i_k][j]
//!                 / pop[i_k]^ii_src_alpha / pop[j]^ii_tgt_beta
//!    ```
//!
//! 2. **Session kNN (STAN / V-SKNN style).** A ring buffer of the most recent
//!    `knn_max_sessions` sessions plus an inverted index item -> the
//!    `knn_sessions_per_item` most recent sessions containing it. For a prefix,
//!    prefix item at distance t from the end (latest occurrence; t = 0 is the
//!    last click) has weight w1 = exp(-t / knn_lambda_pos). Candidates = the
//!    `knn_sample` most recent stored sessions sharing an item with the prefix
//!    (the session being ranked excluded).
//!    ```text
//!    sim(N) = sum_{distinct i in N ∩ prefix} w1(i)
//!             * exp(-(now - sid_N) / knn_lambda_time)
//!    ```
//!    The `knn_k` most similar sessions vote. With `m` the position in N of
//!    the matched item that is most recent in the prefix, the item at position
//!    q of N receives
//!    ```text
//!    B(j) += sim(N) * exp(-(q - m) / knn_lambda_after)    if q > m
//!    B(j) += sim(N) * exp(-(m - q) / knn_lambda_before)   if q <= m
//!    ```
//!
//! 3. **Repeat / re-visit (learned online).** While observing, the model counts
//!    how often the next click re-visits the item whose latest occurrence is t
//!    clicks back (`rate(t) = hits[t] / opportunities[t]`), and how often the
//!    next click is a repeat per prefix bucket (length capped at 10 x last click
//!    repeats the previous one x prefix already has a repeat).
//!    ```text
//!    R(j) = rate(t_latest(j)) + rep_count_w * sum_{older occ.} rate(t_occ)
//!    ```
//!    The per-case repeat weight is multiplied by
//!    ```text
//!    rep_mult = (P(repeat | bucket) / P(repeat))^rep_gamma.
//!    ```
//!
//! Final: score(j) = w_ii*A(j)/max A + w_knn*B(j)/max B + w_rep*rep_mult*R(j)/max R.
//!
//! Memory is bounded by: `ii_cap` neighbours per item (a neighbour map is pruned
//! back to its `ii_cap` heaviest entries when it exceeds 2*ii_cap),
//! `knn_max_sessions` stored sessions of at most `max_session_len` clicks (they
//! double as the per-session buffers of live sessions), and
//! `knn_sessions_per_item` index entries per item. The item table grows with the
//! catalogue (one entry per item ever seen).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::{footprint, ItemIndex};
use neighbours::Neighbours;
use session_list::{SessionList, SWEEP_EVERY};

mod neighbours;
mod scoring;
mod session_list;

pub use scoring::PartName;

/// Hyper-parameters. `Default` = values tuned on the Diginetica validation
/// slice (first 90% of training sessions -> last 10%).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    // ---- item-to-item component ----
    /// Max position gap between two clicks of a session that forms a pair.
    pub ii_window: usize,
    /// Forward pair weight = gap^-ii_fwd_pow.
    pub ii_fwd_pow: f32,
    /// Backward pair weight = ii_bwd_weight * gap^-ii_bwd_pow.
    pub ii_bwd_weight: f32,
    pub ii_bwd_pow: f32,
    /// Max neighbours kept per item.
    pub ii_cap: usize,
    /// Source normalisation: divide by pop(i)^alpha.
    pub ii_src_alpha: f32,
    /// Target normalisation: divide by pop(j)^beta.
    pub ii_tgt_beta: f32,
    /// Number of most recent distinct prefix items used.
    pub ii_recent: usize,
    /// Weight of the k-th most recent distinct prefix item = exp(-k * decay).
    pub ii_recency_decay: f32,
    /// Time decay of pair counts and popularity (e-folding time, in sessions);
    /// <= 0 disables decay.
    pub ii_time_tau: f32,

    // ---- session-kNN component ----
    /// Inverted index: most recent sessions kept per item.
    pub knn_sessions_per_item: usize,
    /// Sessions kept in the store (ring buffer).
    pub knn_max_sessions: usize,
    /// Candidate sessions considered (most recent first).
    pub knn_sample: usize,
    /// Neighbours that vote.
    pub knn_k: usize,
    /// Prefix position decay (in clicks).
    pub knn_lambda_pos: f32,
    /// Neighbour-session age decay (in sessions); >= 1e8 disables it.
    pub knn_lambda_time: f32,
    /// Decay of neighbour items after / before the match position (in clicks).
    pub knn_lambda_after: f32,
    pub knn_lambda_before: f32,
    /// Max clicks remembered per session (oldest dropped).
    pub max_session_len: usize,

    // ---- repeat component ----
    /// true: recency profile of repeats learned online; false: exp(-t/rep_lambda).
    pub rep_learned: bool,
    pub rep_lambda: f32,
    /// Relative weight of additional (older) occurrences of an item in the prefix.
    pub rep_count_w: f32,
    /// Exponent of the per-case repeat-weight multiplier (0 = constant weight).
    pub rep_gamma: f32,

    // ---- blend ----
    pub w_ii: f32,
    pub w_knn: f32,
    pub w_rep: f32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            ii_window: 10,
            ii_fwd_pow: 1.0,
            ii_bwd_weight: 0.5,
            ii_bwd_pow: 1.0,
            ii_cap: 500,
            ii_src_alpha: 0.5,
            ii_tgt_beta: 0.1,
            ii_recent: 10,
            ii_recency_decay: 0.7,
            ii_time_tau: 130_000.0,
            knn_sessions_per_item: 1000,
            knn_max_sessions: 250_000,
            knn_sample: 500,
            knn_k: 50,
            knn_lambda_pos: 2.0,
            knn_lambda_time: 100_000.0,
            knn_lambda_after: 2.5,
            knn_lambda_before: 3.0,
            max_session_len: 50,
            rep_learned: true,
            rep_lambda: 2.0,
            rep_count_w: 0.3,
            rep_gamma: 1.5,
            w_ii: 0.5,
            w_knn: 1.0,
            w_rep: 0.8,
        }
    }
}

impl Params {
    /// Takes `from`'s scoring-time fields (how a prefix is scored from what was
    /// learned: recency weights, neighbourhood, the repeat profile, the blend),
    /// keeping this one's learning-time fields (pair windows, decays, bounds), which
    /// only a relearning could change. What the self-tuner may choose.
    pub fn set_scoring(&mut self, from: &Params) {
        self.ii_src_alpha = from.ii_src_alpha;
        self.ii_recent = from.ii_recent;
        self.ii_recency_decay = from.ii_recency_decay;
        self.knn_sample = from.knn_sample;
        self.knn_k = from.knn_k;
        self.knn_lambda_pos = from.knn_lambda_pos;
        self.knn_lambda_time = from.knn_lambda_time;
        self.knn_lambda_after = from.knn_lambda_after;
        self.knn_lambda_before = from.knn_lambda_before;
        self.rep_learned = from.rep_learned;
        self.rep_lambda = from.rep_lambda;
        self.rep_count_w = from.rep_count_w;
        self.rep_gamma = from.rep_gamma;
        self.w_ii = from.w_ii;
        self.w_knn = from.w_knn;
        self.w_rep = from.w_rep;
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ItemState {
    /// Decayed click count (in units of the current time scale).
    pop: f32,
    /// Decayed weighted pair counts W[self][j].
    nbrs: Neighbours,
    /// The most recent sessions containing the item, in the order they came to it.
    sessions: SessionList,
}

/// Item states by item index (the indexes are dense): one slot read per neighbour
/// scored, where a hash probe would cost a cache miss. A state is shared with the
/// published snapshots until the learner next changes it (copy on write), so that
/// publishing copies pointers, and only the items changed since are held twice.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ItemTable {
    #[serde(with = "shared")]
    states: Vec<Arc<ItemState>>,
    /// `pop.max(1e-6)^-ii_tgt_beta` by item index, kept with `pop`: the target
    /// normalisation of every scored neighbour, packed for the cache.
    target_norm: Vec<f32>,
    /// Time spent copying item states and sessions a published snapshot shared,
    /// since [`SessionModel::take_copy_time`] last took it.
    #[serde(skip)]
    copying: Duration,
}

/// `slot`'s value, to change: copied first if a published snapshot shares it, the
/// copy's time added to `copying`.
fn unshared<'a, T: Clone>(slot: &'a mut Arc<T>, copying: &mut Duration) -> &'a mut T {
    if Arc::strong_count(slot) == 1 {
        return Arc::make_mut(slot);
    }
    let started = Instant::now();
    let value = Arc::make_mut(slot);
    *copying += started.elapsed();
    value
}

impl ItemTable {
    fn get(&self, item: ItemIndex) -> Option<&ItemState> {
        self.states.get(item as usize).map(Arc::as_ref)
    }

    /// Item `item`'s state, created (with every lower index) if new.
    fn get_mut(&mut self, item: ItemIndex, p: &Params) -> &mut ItemState {
        let index = item as usize;
        if self.states.len() <= index {
            self.states.resize_with(index + 1, Arc::default);
            self.target_norm.resize(index + 1, target_norm(0.0, p));
        }
        unshared(&mut self.states[index], &mut self.copying)
    }

    /// Adds `weight` to `item`'s decayed count.
    fn add_pop(&mut self, item: ItemIndex, weight: f32, p: &Params) -> &mut ItemState {
        let state = self.get_mut(item, p);
        state.pop += weight;
        let norm = target_norm(state.pop, p);
        self.target_norm[item as usize] = norm;
        unshared(&mut self.states[item as usize], &mut self.copying)
    }

    fn target_norm(&self, item: ItemIndex, p: &Params) -> f32 {
        match self.target_norm.get(item as usize) {
            Some(&norm) => norm,
            None => target_norm(0.0, p),
        }
    }

    /// Drops the sessions older than `first` from every item's list (`next`: the next
    /// session ordinal), so that every ordinal listed is told from its low bits.
    fn drop_sessions_before(&mut self, first: u64, next: u64) {
        for state in &mut self.states {
            unshared(state, &mut self.copying).sessions.drop_before(first, next);
        }
    }

    /// Multiplies every decayed count by `factor`.
    fn rescale(&mut self, factor: f32, p: &Params) {
        for (state, norm) in self.states.iter_mut().zip(&mut self.target_norm) {
            let state = unshared(state, &mut self.copying);
            state.pop *= factor;
            *norm = target_norm(state.pop, p);
            state.nbrs.scale(factor);
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredSession {
    key: u64,
    items: Vec<ItemIndex>,
}

/// A copy keeps the capacity, as an item state's does.
impl Clone for StoredSession {
    fn clone(&self) -> Self {
        let mut items = Vec::with_capacity(self.items.capacity());
        items.extend_from_slice(&self.items);
        StoredSession { key: self.key, items }
    }
}

const REP_BUCKETS: usize = 11 * 4;
const REP_DIST: usize = 20;
/// When the time weight exceeds this, all decayed counts are rescaled.
const RESCALE_AT: f32 = 1.0e6;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionModel {
    params: Params,
    items: ItemTable,
    /// Ring buffer of sessions; `sessions[k]` has ordinal `first_sid + k`. Shared
    /// with the published snapshots until changed, like the item states.
    #[serde(with = "shared")]
    sessions: VecDeque<Arc<StoredSession>>,
    first_sid: u64,
    /// Session key -> ordinal, for sessions still in the store.
    key_to_sid: FxHashMap<u64, u64>,
    /// Session ordinal at which the time weight is 1 (moved on rescale).
    time_origin: u64,
    /// Per prefix bucket: [#next click was a repeat, #next clicks].
    rep_bucket: Vec<[f64; 2]>,
    /// hits[t]: next click re-visited the item whose latest occurrence is t back;
    /// opp[t]: prefixes long enough to have a distance t.
    rep_hits: Vec<f64>,
    rep_opp: Vec<f64>,
}

/// Bucket of a prefix for the repeat statistics: length (capped at 10) x
/// (last click repeats the previous one) x (prefix contains any repeat).
fn rep_bucket_of(prefix: &[ItemIndex]) -> usize {
    let n = prefix.len();
    let last_rep = n >= 2 && prefix[n - 1] == prefix[n - 2];
    let any_rep = (1..n).any(|a| prefix[..a].contains(&prefix[a]));
    n.min(10) * 4 + 2 * last_rep as usize + any_rep as usize
}

/// The target normalisation of an item with decayed count `pop`.
fn target_norm(pop: f32, p: &Params) -> f32 {
    if p.ii_tgt_beta != 0.0 {
        pop.max(1e-6).powf(-p.ii_tgt_beta)
    } else {
        1.0
    }
}

impl SessionModel {
    pub fn new(params: Params) -> Self {
        SessionModel {
            params,
            items: ItemTable::default(),
            sessions: VecDeque::new(),
            first_sid: 0,
            key_to_sid: FxHashMap::default(),
            time_origin: 0,
            rep_bucket: vec![[0.0; 2]; REP_BUCKETS],
            rep_hits: vec![0.0; REP_DIST],
            rep_opp: vec![0.0; REP_DIST],
        }
    }

    /// Estimated heap bytes: the item table (neighbour maps and session lists per
    /// item), the stored sessions and their index.
    pub fn heap_bytes(&self) -> usize {
        let items = &self.items;
        let per_item: usize = items
            .states
            .iter()
            .map(|state| footprint::shared(state) + state.nbrs.heap_bytes() + state.sessions.heap_bytes())
            .sum();
        let sessions: usize = self
            .sessions
            .iter()
            .map(|session| footprint::shared(session) + footprint::vec(&session.items))
            .sum();
        footprint::vec(&items.states)
            + footprint::vec(&items.target_norm)
            + per_item
            + footprint::deque(&self.sessions)
            + sessions
            + footprint::map(&self.key_to_sid)
    }

    /// The time spent copying what a published snapshot shared (copy on write) since
    /// the last call: the deferred cost of publishing.
    pub fn take_copy_time(&mut self) -> Duration {
        std::mem::take(&mut self.items.copying)
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Scores from now on with `tuned`'s scoring-time fields ([`Params::set_scoring`]).
    pub fn set_scoring(&mut self, tuned: &Params) {
        self.params.set_scoring(tuned);
    }

    /// Whether the session `key` is among the sessions stored.
    pub fn knows(&self, key: u64) -> bool {
        self.key_to_sid.contains_key(&key)
    }

    fn next_sid(&self) -> u64 {
        self.first_sid + self.sessions.len() as u64
    }

    /// Consume one click (stream order). Sessions may interleave.
    pub fn observe(&mut self, session: u64, item: ItemIndex) {
        // Locate or create the session record.
        let sid = match self.key_to_sid.get(&session) {
            Some(&s) => s,
            None => {
                let s = self.next_sid();
                self.sessions.push_back(Arc::new(StoredSession {
                    key: session,
                    items: Vec::new(),
                }));
                self.key_to_sid.insert(session, s);
                while self.sessions.len() > self.params.knn_max_sessions.max(1) {
                    let Some(old) = self.sessions.pop_front() else { break };
                    if self.key_to_sid.get(&old.key) == Some(&self.first_sid) {
                        self.key_to_sid.remove(&old.key);
                    }
                    self.first_sid += 1;
                    if self.first_sid % SWEEP_EVERY == 0 {
                        self.items.drop_sessions_before(self.first_sid, s + 1);
                    }
                }
                s
            }
        };

        // Time weight: increments grow as exp(age/tau), equivalent to decaying all
        // old counts; rescale everything once the weight gets large.
        let p = &self.params;
        let mut tw = 1.0f32;
        if p.ii_time_tau > 0.0 {
            tw = ((sid.saturating_sub(self.time_origin)) as f32 / p.ii_time_tau).exp();
            if tw > RESCALE_AT {
                self.items.rescale(1.0 / tw, &self.params);
                self.time_origin = sid;
                tw = 1.0;
            }
        }

        let p = &self.params;
        let (window, fp, bw, bp, cap) = (p.ii_window, p.ii_fwd_pow, p.ii_bwd_weight, p.ii_bwd_pow, p.ii_cap);
        let (max_len, spi) = (p.max_session_len.max(1), p.knn_sessions_per_item);
        let sess = unshared(
            &mut self.sessions[(sid - self.first_sid) as usize],
            &mut self.items.copying,
        );
        let already = sess.items.contains(&item);

        // Online repeat statistics (prefix = clicks so far in this session).
        let n = sess.items.len();
        if n >= 1 {
            let b = rep_bucket_of(&sess.items);
            self.rep_bucket[b][1] += 1.0;
            if let Some(t) = sess.items.iter().rev().position(|&x| x == item) {
                self.rep_bucket[b][0] += 1.0;
                self.rep_hits[t.min(REP_DIST - 1)] += 1.0;
            }
            for t in 0..n.min(REP_DIST) {
                self.rep_opp[t] += 1.0;
            }
        }

        // Pair updates against the previous clicks of this session.
        for (d, &prev) in sess.items.iter().rev().take(window).enumerate() {
            if prev == item {
                continue;
            }
            let gap = (d + 1) as f32;
            let wf = tw * if fp == 1.0 { 1.0 / gap } else { gap.powf(-fp) };
            self.items.get_mut(prev, &self.params).nbrs.add(item, wf, cap);
            if bw > 0.0 {
                let wb = tw * bw * if bp == 1.0 { 1.0 / gap } else { gap.powf(-bp) };
                self.items.get_mut(item, &self.params).nbrs.add(prev, wb, cap);
            }
        }

        sess.items.push(item);
        if sess.items.len() > max_len {
            sess.items.remove(0);
        }
        let st = self.items.add_pop(item, tw, &self.params);
        if !already {
            st.sessions.push(sid, spi);
        }
    }
}

/// Serde of a collection of shared values as the sequence of the values (what it
/// was before they were shared, so stored models still read).
mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<'a, C, T, S>(values: &'a C, serializer: S) -> Result<S::Ok, S::Error>
    where
        &'a C: IntoIterator<Item = &'a Arc<T>>,
        T: Serialize + 'a,
        S: Serializer,
    {
        serializer.collect_seq(values.into_iter().map(Arc::as_ref))
    }

    pub fn deserialize<'de, C, T, D>(deserializer: D) -> Result<C, D::Error>
    where
        C: FromIterator<Arc<T>>,
        T: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<T>::deserialize(deserializer)?.into_iter().map(Arc::new).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_stops_growing_at_the_bounds() {
        let params = Params {
            ii_cap: 5,
            knn_sessions_per_item: 10,
            knn_max_sessions: 50,
            max_session_len: 5,
            ..Params::default()
        };
        let mut model = SessionModel::new(params);
        // A uniform stream over 1,000 items in sessions of 20 clicks: every bound is
        // reached well before the first reading.
        let mut state = 7u64;
        let mut feed = |model: &mut SessionModel, clicks: u64, from: u64| {
            for click in from..from + clicks {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                model.observe(click / 20, ((state >> 33) % 1000) as ItemIndex);
            }
        };
        feed(&mut model, 50_000, 0);
        let filled = model.heap_bytes();
        feed(&mut model, 200_000, 50_000);
        let later = model.heap_bytes();
        assert!(filled > 1000 * 5 * 8, "{filled} bytes hold 1,000 items' neighbours");
        assert_eq!(later, filled, "grew from {filled} to {later} bytes past the bounds");
        // Published every 1,000 clicks: the learner copies what a snapshot shares,
        // and the copies are no larger than what they copy.
        for round in 0..50 {
            let _published = model.clone();
            feed(&mut model, 1_000, 250_000 + round * 1_000);
        }
        let published = model.heap_bytes();
        assert_eq!(
            published, filled,
            "grew from {filled} to {published} bytes with snapshots"
        );
    }

    #[test]
    fn a_published_copy_shares_what_the_learner_has_not_changed_since() {
        let mut model = SessionModel::new(Params::default());
        for session in 0..50u64 {
            for step in 0..5 {
                model.observe(session, ((session * 7 + step * 3) % 40) as ItemIndex);
            }
        }
        let published = model.clone();
        let scores = published.scores(&[21], None);
        // Session 3 (clicks 21, 24, 27, 30, 33) clicks item 1: those six items change.
        model.observe(3, 1);
        let changed: Vec<usize> = (0..model.items.states.len())
            .filter(|&item| !Arc::ptr_eq(&model.items.states[item], &published.items.states[item]))
            .collect();
        assert_eq!(changed, [1, 21, 24, 27, 30, 33]);
        let sessions_changed = (0..model.sessions.len())
            .filter(|&index| !Arc::ptr_eq(&model.sessions[index], &published.sessions[index]))
            .count();
        assert_eq!(sessions_changed, 1);
        assert_eq!(
            published.scores(&[21], None),
            scores,
            "the published copy did not change"
        );
        assert_ne!(model.scores(&[21], None), scores);

        // Stored as before the states were shared: a plain sequence of states.
        let stored = serde_json::to_value(&model).unwrap();
        assert!(
            stored["items"]["states"][1]["nbrs"].is_object(),
            "{}",
            stored["items"]["states"][1]
        );
        let read: SessionModel = serde_json::from_value(stored).unwrap();
        assert_eq!(read.scores(&[21, 1], None), model.scores(&[21, 1], None));
    }
}
