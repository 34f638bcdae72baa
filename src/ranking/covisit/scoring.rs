//! Scoring: a prefix's three parts (repeat, item-to-item, session kNN) in reused
//! per-thread buffers, blended.

use std::cell::RefCell;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{rep_bucket_of, ItemIndex, ItemState, Params, SessionModel, REP_DIST};

/// The three parts of the co-visitation scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartName {
    ItemToItem,
    Knn,
    Repeat,
}

/// The three parts of a prefix's scores, raw, each with its maximum (a part is
/// divided by it when blended). Items a part does not reach score 0 in it.
#[derive(Default)]
struct Components {
    ii: Part,
    knn: Part,
    rep: Vec<(ItemIndex, f32)>,
    rep_max: f32,
    /// Per-case multiplier of the repeat weight.
    rep_mult: f32,
}

thread_local! {
    /// Each thread's components, reused from one scoring to the next: their dense
    /// parts are as long as the item table, too much to allocate per request.
    static COMPONENTS: RefCell<Components> = RefCell::default();
}

impl Components {
    /// Empties the parts, sized for `items` items (they grow if one is added past it).
    fn reset(&mut self, items: usize) {
        self.ii.reset(items);
        self.knn.reset(items);
        self.rep.clear();
        self.rep_max = 0.0;
        self.rep_mult = 1.0;
    }

    /// `score(j)` of the module doc; 0 for an item no part reaches.
    fn blend(&self, item: ItemIndex, p: &Params) -> f32 {
        let rep = self.rep.iter().find(|(j, _)| *j == item).map_or(0.0, |(_, s)| *s);
        let mut score = 0.0;
        for (raw, max, weight) in [
            (self.ii.get(item), self.ii.max, p.w_ii),
            (self.knn.get(item), self.knn.max, p.w_knn),
            (rep, self.rep_max, p.w_rep * self.rep_mult),
        ] {
            if raw != 0.0 && weight != 0.0 {
                score += weight * scaled(raw, max);
            }
        }
        score
    }
}

/// One part's raw scores by item index. Dense, so that adding to an item is a
/// slot write where a hash map would probe (and miss the cache): the item-to-item
/// part adds once per neighbour of every recent item. Every value added is ≥ 0,
/// so the items reached are the non-zero slots, listed in `reached`.
#[derive(Default)]
struct Part {
    values: Vec<f32>,
    reached: Vec<ItemIndex>,
    max: f32,
}

impl Part {
    fn reset(&mut self, items: usize) {
        for &item in &self.reached {
            self.values[item as usize] = 0.0;
        }
        self.reached.clear();
        if self.values.len() < items {
            self.values.resize(items, 0.0);
        }
        self.max = 0.0;
    }

    /// Adds `value` (≥ 0) to `item`.
    fn add(&mut self, item: ItemIndex, value: f32) {
        let index = item as usize;
        if index >= self.values.len() {
            self.values.resize(index + 1, 0.0);
        }
        let slot = &mut self.values[index];
        if *slot == 0.0 {
            if value == 0.0 {
                return;
            }
            self.reached.push(item);
        }
        *slot += value;
    }

    fn get(&self, item: ItemIndex) -> f32 {
        self.values.get(item as usize).copied().unwrap_or(0.0)
    }

    /// The items reached, in the order first reached, with their values.
    fn iter(&self) -> impl Iterator<Item = (ItemIndex, f32)> + '_ {
        self.reached.iter().map(|&item| (item, self.values[item as usize]))
    }

    /// Sets `max` once every value is in.
    fn close(&mut self) {
        self.max = self.iter().fold(0.0f32, |max, (_, value)| max.max(value));
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.reached.is_empty()
    }
}

/// A part's score divided by the part's maximum (left as is when that is not positive).
fn scaled(raw: f32, max: f32) -> f32 {
    if max > 0.0 {
        raw / max
    } else {
        raw
    }
}

fn max_of<'a>(scores: impl IntoIterator<Item = &'a f32>) -> f32 {
    scores.into_iter().fold(0.0f32, |a, &x| a.max(x))
}

impl SessionModel {
    /// Sparse blended scores (higher is better, all > 0) for the click after `prefix`
    /// (oldest first). `exclude`: the session being ranked, never its own neighbour.
    pub fn scores(&self, prefix: &[ItemIndex], exclude: Option<u64>) -> FxHashMap<ItemIndex, f32> {
        self.with_components(prefix, exclude, |c| {
            let p = &self.params;
            let mut scores: FxHashMap<ItemIndex, f32> = FxHashMap::default();
            scores.reserve(c.ii.reached.len() + c.knn.reached.len() + c.rep.len());
            // Part by part, in the order `blend` adds them, so both give the same floats.
            let mut add = |part: &mut dyn Iterator<Item = (ItemIndex, f32)>, max: f32, weight: f32| {
                if weight != 0.0 {
                    for (item, raw) in part {
                        *scores.entry(item).or_insert(0.0) += weight * scaled(raw, max);
                    }
                }
            };
            add(&mut c.ii.iter(), c.ii.max, p.w_ii);
            add(&mut c.knn.iter(), c.knn.max, p.w_knn);
            add(&mut c.rep.iter().copied(), c.rep_max, p.w_rep * c.rep_mult);
            scores.retain(|_, score| *score > 0.0);
            scores
        })
    }

    /// The blended score of each of `items` (0 where `scores` has none): what a
    /// ranking request needs, without collecting the scores of every item reached.
    pub fn scores_of(&self, prefix: &[ItemIndex], exclude: Option<u64>, items: &[Option<ItemIndex>]) -> Vec<f32> {
        self.with_components(prefix, exclude, |c| {
            items
                .iter()
                .map(|item| item.map_or(0.0, |item| c.blend(item, &self.params).max(0.0)))
                .collect()
        })
    }

    /// One part of the scores for `prefix` under `params` (which may differ from the
    /// model's own in their scoring-time fields, [`Params::set_scoring`]): its `top`
    /// items, each scaled to the part's maximum (so the best is 1), best first, and
    /// the part's multiplier (the per-case repeat multiplier; 1 for the others). The
    /// blended score is `Σ weight × multiplier × scaled value` over the parts: what the
    /// self-tuner recombines under other weights without scoring again.
    pub fn part(
        &self,
        part: PartName,
        prefix: &[ItemIndex],
        exclude: Option<u64>,
        params: &Params,
        top: usize,
    ) -> (Vec<(ItemIndex, f32)>, f32) {
        let mut only = params.clone();
        for (name, weight) in [
            (PartName::ItemToItem, &mut only.w_ii),
            (PartName::Knn, &mut only.w_knn),
            (PartName::Repeat, &mut only.w_rep),
        ] {
            *weight = if name == part { 1.0 } else { 0.0 };
        }
        COMPONENTS.with_borrow_mut(|c| {
            self.components(prefix, exclude, &only, c);
            let (mut values, max, multiplier): (Vec<(ItemIndex, f32)>, f32, f32) = match part {
                PartName::ItemToItem => (c.ii.iter().collect(), c.ii.max, 1.0),
                PartName::Knn => (c.knn.iter().collect(), c.knn.max, 1.0),
                PartName::Repeat => (c.rep.clone(), c.rep_max, c.rep_mult),
            };
            let by_value = |a: &(ItemIndex, f32), b: &(ItemIndex, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            if values.len() > top {
                values.select_nth_unstable_by(top, by_value);
                values.truncate(top);
            }
            values.sort_unstable_by(by_value);
            for (_, value) in &mut values {
                *value = scaled(*value, max);
            }
            (values, multiplier)
        })
    }

    /// Calls `read` with the components of `prefix`, in this thread's reused buffers.
    fn with_components<T>(&self, prefix: &[ItemIndex], exclude: Option<u64>, read: impl FnOnce(&Components) -> T) -> T {
        COMPONENTS.with_borrow_mut(|components| {
            self.components(prefix, exclude, &self.params, components);
            read(components)
        })
    }

    /// Fills `out` with the three parts for `prefix` under `p`, raw, with their maxima.
    fn components(&self, prefix: &[ItemIndex], exclude: Option<u64>, p: &Params, out: &mut Components) {
        let n = prefix.len();
        out.reset(self.items.states.len());
        if n == 0 {
            return;
        }
        // Distinct prefix items, most recent first, with distance from the end.
        let mut distinct: Vec<(ItemIndex, usize)> = Vec::with_capacity(n);
        for t in 0..n {
            let it = prefix[n - 1 - t];
            if !distinct.iter().any(|x| x.0 == it) {
                distinct.push((it, t));
            }
        }

        // ---- repeat ----
        if p.w_rep != 0.0 {
            let prof = |t: usize| {
                if p.rep_learned {
                    self.rep_rate(t)
                } else {
                    (-(t as f32) / p.rep_lambda).exp()
                }
            };
            let rep = &mut out.rep;
            for t in 0..n {
                let it = prefix[n - 1 - t];
                match rep.iter_mut().find(|x| x.0 == it) {
                    Some(x) => x.1 += p.rep_count_w * prof(t), // older occurrence
                    None => rep.push((it, prof(t))),           // latest occurrence
                }
            }
            out.rep_max = max_of(rep.iter().map(|(_, score)| score));
            if p.rep_gamma != 0.0 {
                let b = self.rep_bucket[rep_bucket_of(prefix)];
                let (gr, gt) = self.rep_bucket.iter().fold((0.0, 0.0), |a, x| (a.0 + x[0], a.1 + x[1]));
                let pb = (b[0] + 1.0) / (b[1] + 2.0);
                let pg = (gr + 1.0) / (gt + 2.0);
                out.rep_mult = ((pb / pg) as f32).powf(p.rep_gamma);
            }
        }

        // ---- item-to-item ----
        if p.w_ii != 0.0 {
            for (k, &(it, _)) in distinct.iter().take(p.ii_recent).enumerate() {
                let st = match self.items.get(it) {
                    Some(s) => s,
                    None => continue,
                };
                let r = (-(k as f32) * p.ii_recency_decay).exp()
                    * if p.ii_src_alpha != 0.0 {
                        st.pop.powf(-p.ii_src_alpha)
                    } else {
                        1.0
                    };
                for (j, w) in st.nbrs.iter() {
                    out.ii.add(j, r * w * self.items.target_norm(j, p));
                }
            }
            out.ii.close();
        }

        // ---- session kNN ----
        if p.w_knn != 0.0 {
            self.knn(&distinct, exclude, p, &mut out.knn);
            out.knn.close();
        }
    }

    /// Learned rate at which the next click re-visits the item seen t clicks back.
    fn rep_rate(&self, t: usize) -> f32 {
        let t = t.min(REP_DIST - 1);
        ((self.rep_hits[t] + 0.1) / (self.rep_opp[t] + 1.0)) as f32
    }

    /// Adds the session-kNN votes for the prefix's `distinct` items to `acc`.
    fn knn(&self, distinct: &[(ItemIndex, usize)], exclude: Option<u64>, p: &Params, acc: &mut Part) {
        let cand = self.knn_candidates(distinct, p.knn_sample);
        let now = self.next_sid() as f32;
        let w1: Vec<f32> = distinct
            .iter()
            .map(|x| (-(x.1 as f32) / p.knn_lambda_pos).exp())
            .collect();
        let slots = Slots::new(distinct);

        // Similarities; remember m = position in N of the prefix-latest match.
        let mut sims: Vec<(f32, u64, usize)> = Vec::with_capacity(cand.len());
        for &sid in &cand {
            let sess = &self.sessions[(sid - self.first_sid) as usize];
            if Some(sess.key) == exclude {
                continue;
            }
            let mut sim = 0.0f32;
            let mut best_t = usize::MAX;
            let mut m = 0usize;
            let mut seen: u64 = 0; // bitmask over the first 64 distinct prefix items
            for (q, &it) in sess.items.iter().enumerate() {
                if let Some(di) = slots.of(it) {
                    if di < 64 && seen & (1u64 << di) == 0 {
                        seen |= 1u64 << di;
                        sim += w1[di];
                    }
                    let t = distinct[di].1;
                    if t < best_t || (t == best_t && q > m) {
                        best_t = t;
                        m = q;
                    }
                }
            }
            if sim <= 0.0 {
                continue;
            }
            if p.knn_lambda_time < 1.0e8 {
                sim *= (-(now - sid as f32) / p.knn_lambda_time).exp();
            }
            sims.push((sim, sid, m));
        }
        if sims.len() > p.knn_k {
            // Top-k by similarity, ties to the more recent session.
            sims.select_nth_unstable_by(p.knn_k, |a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
            sims.truncate(p.knn_k);
        }
        // A vote's weight by its distance from the match, computed once per distance up
        // to the longest voting session: the same floats as an `exp` per voting item.
        let longest = sims
            .iter()
            .map(|&(_, sid, _)| self.sessions[(sid - self.first_sid) as usize].items.len())
            .max()
            .unwrap_or(0);
        let decay = |lambda: f32| -> Vec<f32> { (0..longest).map(|d| (-(d as f32) / lambda).exp()).collect() };
        let (after, before) = (decay(p.knn_lambda_after), decay(p.knn_lambda_before));
        for &(sim, sid, m) in &sims {
            let sess = &self.sessions[(sid - self.first_sid) as usize];
            for (q, &it) in sess.items.iter().enumerate() {
                let w = if q > m { after[q - m] } else { before[m - q] };
                acc.add(it, sim * w);
            }
        }
    }

    /// The `sample` most recent stored sessions that hold one of the `distinct` items,
    /// most recent first. An item lists up to `knn_sessions_per_item` sessions, so ten
    /// popular items give thousands: then they are made distinct by a set and the most
    /// recent chosen in linear time, and only those are sorted. A few are sorted as
    /// they come (a set costs more than it saves there). Sessions are chosen by how
    /// far back they are (32 bits, as the lists hold them), and only the chosen are
    /// turned into ordinals.
    fn knn_candidates(&self, distinct: &[(ItemIndex, usize)], sample: usize) -> Vec<u64> {
        let states: Vec<&ItemState> = distinct.iter().filter_map(|&(it, _)| self.items.get(it)).collect();
        let next = self.next_sid();
        // The stored sessions are 1 to `stored` back.
        let stored = u32::try_from(self.sessions.len()).unwrap_or(u32::MAX);
        let listed = states.iter().flat_map(|st| st.sessions.backs(next));
        let backs = listed.filter(|&back| back.wrapping_sub(1) < stored);
        let mut cand: Vec<u32>;
        if states.iter().map(|st| st.sessions.len()).sum::<usize>() <= SORTED_CANDIDATES.max(2 * sample) {
            cand = backs.collect();
            cand.sort_unstable();
            cand.dedup();
        } else {
            let mut seen: FxHashSet<u32> = FxHashSet::default();
            cand = backs.filter(|&back| seen.insert(back)).collect();
            if cand.len() > sample {
                cand.select_nth_unstable(sample);
                cand.truncate(sample);
            }
            cand.sort_unstable();
        }
        cand.truncate(sample);
        cand.into_iter().map(|back| next - back as u64).collect()
    }
}

/// Candidate sessions up to this many (with repeats) are sorted as they come.
const SORTED_CANDIDATES: usize = 256;

/// Where each of a prefix's distinct items is among them: what every item of every
/// candidate session is looked up in. Short prefixes are scanned; longer ones (up to
/// `max_session_len` items) are probed in a map, where a scan costs a compare per item.
enum Slots<'a> {
    Scan(&'a [(ItemIndex, usize)]),
    Map(FxHashMap<ItemIndex, usize>),
}

/// Prefixes with at most this many distinct items are scanned.
const SCANNED_SLOTS: usize = 8;

impl Slots<'_> {
    fn new(distinct: &[(ItemIndex, usize)]) -> Slots<'_> {
        match distinct.len() > SCANNED_SLOTS {
            true => Slots::Map(distinct.iter().enumerate().map(|(slot, x)| (x.0, slot)).collect()),
            false => Slots::Scan(distinct),
        }
    }

    fn of(&self, item: ItemIndex) -> Option<usize> {
        match self {
            Slots::Scan(distinct) => distinct.iter().position(|x| x.0 == item),
            Slots::Map(slots) => slots.get(&item).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_seen_together_score_for_each_other() {
        let mut model = SessionModel::new(Params::default());
        for session in 0..20 {
            model.observe(session, 1);
            model.observe(session, 2);
            model.observe(session, 3 + (session as ItemIndex % 2) * 10);
        }
        let scores = model.scores(&[1], None);
        assert!(scores[&2] > scores.get(&3).copied().unwrap_or(0.0), "{scores:?}");
        assert!(!scores.contains_key(&99));
    }

    #[test]
    fn the_ranked_session_is_not_its_own_neighbour() {
        let mut model = SessionModel::new(Params::default());
        model.observe(7, 1);
        model.observe(7, 2);
        assert!(
            model.with_components(&[1], Some(7), |own| own.knn.is_empty()),
            "only itself shares item 1"
        );
        assert!(!model.with_components(&[1], None, |all| all.knn.is_empty()));
    }

    #[test]
    fn knn_candidates_are_the_most_recent_distinct_sessions_sharing_an_item() {
        let mut model = SessionModel::new(Params::default());
        // Some 260 sessions an item: four items list more than are sorted as they come.
        for session in 0..2_000u64 {
            for step in 0..3 {
                model.observe(session, ((session * 5 + step * 7) % 23) as ItemIndex);
            }
        }
        // An old session coming back adds its sid after newer ones in an item's list.
        model.observe(3, 4);
        let distinct: Vec<(ItemIndex, usize)> = [4, 9, 11, 16].into_iter().enumerate().map(|(t, it)| (it, t)).collect();
        // The first three choose among a set, the last sorts them all.
        for sample in [1, 10, 25, 1_000] {
            let mut expected: Vec<u64> = distinct
                .iter()
                .filter_map(|&(it, _)| model.items.get(it))
                .flat_map(|state| state.sessions.iter(model.next_sid()))
                .filter(|&sid| sid >= model.first_sid)
                .collect();
            expected.sort_unstable_by(|a, b| b.cmp(a));
            expected.dedup();
            expected.truncate(sample);
            assert!(!expected.is_empty());
            assert_eq!(model.knn_candidates(&distinct, sample), expected, "sample {sample}");
        }
    }

    #[test]
    fn a_long_prefix_finds_its_items_by_map_as_a_short_one_by_scan() {
        let distinct: Vec<(ItemIndex, usize)> = (0..12).map(|t| ((t * 3 + 1) as ItemIndex, t)).collect();
        let mapped = Slots::new(&distinct);
        assert!(matches!(mapped, Slots::Map(_)));
        for item in 0..40 {
            assert_eq!(mapped.of(item), Slots::Scan(&distinct).of(item), "item {item}");
        }
        assert!(matches!(Slots::new(&distinct[..SCANNED_SLOTS]), Slots::Scan(_)));
    }

    #[test]
    fn scores_of_some_items_are_their_sparse_scores() {
        let mut model = SessionModel::new(Params::default());
        for session in 0..30u64 {
            for step in 0..4 {
                model.observe(session, ((session * 7 + step * 3) % 11) as ItemIndex);
            }
        }
        let prefix = [3, 5, 3];
        let sparse = model.scores(&prefix, Some(4));
        assert!(sparse.len() > 3, "{sparse:?}");
        let items: Vec<Option<ItemIndex>> = (0..14).map(Some).chain([None]).collect();
        let dense = model.scores_of(&prefix, Some(4), &items);
        for (item, score) in items.iter().zip(dense) {
            let expected = item.and_then(|item| sparse.get(&item).copied()).unwrap_or(0.0);
            assert_eq!(score, expected, "item {item:?}");
        }
    }
}
