//! Load generators. A [`Load`] is a list of request bodies for one endpoint of one
//! target; it runs either as a closed loop (a fixed number of keep-alive connections,
//! one request in flight on each: the maximum throughput) or as an open loop (requests
//! scheduled at a fixed rate, latency counted from the scheduled time: no coordinated
//! omission). A check given to either looks at every response and tallies what the tool
//! wants to know of them; [`on_connections`] runs any per-connection loop of a tool's own.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use hyper::StatusCode;
use tokio::task::JoinSet;

use crate::client::{snippet, Connection, Endpoint, Target};
use crate::cpu::CpuTimes;
use crate::stats::elapsed_ms;

/// Failed responses of a phase: how many, and the first one.
#[derive(Default, Debug)]
pub struct Failures {
    /// Responses the check counted as failed.
    pub count: usize,
    /// `"<status>: <start of the body>"` of the first failure.
    pub first: Option<String>,
}

impl Failures {
    pub fn record(&mut self, status: StatusCode, body: &[u8]) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("{status}: {}", snippet(body)));
        }
    }

    pub fn merge(&mut self, other: Failures) {
        self.count += other.count;
        if self.first.is_none() {
            self.first = other.first;
        }
    }
}

/// What a loop's check counted in the responses, on one connection or, merged, on all.
#[derive(Default, Debug)]
pub struct Tally {
    /// Responses the check did not accept but let the loop go on after.
    pub failures: Failures,
    /// Result items in the responses, where the check counts them.
    pub items: usize,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.failures.merge(other.failures);
        self.items += other.items;
    }
}

/// The check of a loop that counts a response other than 200 as a failure and goes on.
pub fn count_non_200(_body: usize, status: StatusCode, response: &[u8], tally: &mut Tally) -> Result<()> {
    if status != StatusCode::OK {
        tally.failures.record(status, response);
    }
    Ok(())
}

/// How long a closed loop runs.
#[derive(Clone, Copy, Debug)]
pub enum Span {
    /// Until every body was sent once.
    EachBodyOnce,
    /// For this many seconds, cycling through the bodies.
    Seconds(f64),
}

/// Request bodies for one endpoint of one target.
pub struct Load {
    pub target: Arc<Target>,
    pub endpoint: Endpoint,
    /// Made before any timing; the loops take them in order (a closed loop for a span of
    /// seconds and the open loop cycle through them).
    pub bodies: Arc<Vec<Bytes>>,
}

/// What a closed loop measured.
pub struct ClosedRun {
    /// Per request, sent -> whole response, in ms.
    pub latencies: Vec<f64>,
    /// From the clock's start (every connection open) to the last response.
    pub seconds: f64,
    /// What the check tallied, over all connections.
    pub tally: Tally,
}

impl ClosedRun {
    /// Requests per second.
    pub fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds
    }
}

/// What an open loop measured.
pub struct OpenRun {
    /// The scheduled rate, requests per second.
    pub rate: f64,
    /// Completed requests / (last completion - first scheduled time).
    pub achieved: f64,
    /// Scheduled time -> response complete, and scheduled time -> the request was sent.
    pub latencies: Vec<f64>,
    pub send_lag: Vec<f64>,
    /// What the check tallied, over all connections.
    pub tally: Tally,
    /// The share of the machine's CPU time the hypervisor took while it ran, if known.
    pub steal: Option<f64>,
}

impl Load {
    /// `connections` keep-alive connections (opened before the clock starts; with
    /// [`Span::EachBodyOnce`] no more than there are bodies), one request in flight on
    /// each, each taking the next body when its response is in. `check(body index,
    /// status, response, tally)` sees every response; an error from it ends the loop.
    pub async fn closed_loop<C>(&self, connections: usize, span: Span, check: C) -> Result<ClosedRun>
    where
        C: Fn(usize, StatusCode, &[u8], &mut Tally) -> Result<()> + Clone + Send + 'static,
    {
        let connections = match span {
            Span::EachBodyOnce => connections.min(self.bodies.len()),
            Span::Seconds(_) => connections,
        };
        let senders = self.target.connect_many(connections).await?;
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let deadline = match span {
            Span::EachBodyOnce => None,
            Span::Seconds(seconds) => Some(started + Duration::from_secs_f64(seconds)),
        };
        let runs = on_connections(senders, |_, mut sender| {
            let (target, endpoint, bodies) = (self.target.clone(), self.endpoint.clone(), self.bodies.clone());
            let (next, check) = (next.clone(), check.clone());
            async move {
                let (mut latencies, mut tally) = (Vec::new(), Tally::default());
                loop {
                    let index = match deadline {
                        Some(deadline) if Instant::now() >= deadline => break,
                        Some(_) => next.fetch_add(1, Ordering::Relaxed) % bodies.len(),
                        None => next.fetch_add(1, Ordering::Relaxed),
                    };
                    let Some(body) = bodies.get(index) else { break };
                    let sent = Instant::now();
                    let (status, response) = target.call(&mut sender, &endpoint, body.clone()).await?;
                    latencies.push(elapsed_ms(sent));
                    check(index, status, &response, &mut tally)?;
                }
                anyhow::Ok((latencies, tally))
            }
        })
        .await?;
        let mut total = ClosedRun {
            latencies: Vec::new(),
            seconds: 0.0,
            tally: Tally::default(),
        };
        for (latencies, tally) in runs {
            total.latencies.extend(latencies);
            total.tally.merge(tally);
        }
        total.seconds = started.elapsed().as_secs_f64();
        Ok(total)
    }

    /// Requests scheduled at `rate` for `seconds`, cycling through the bodies, each handed
    /// to the first free of `connections` (or, when all are busy, to the next one freed);
    /// latency from the scheduled time. `check` as for [`Load::closed_loop`].
    ///
    /// A thread of its own paces the schedule (its sleeps are precise to tens of µs, the
    /// runtime's timer only to the millisecond) and hands each request straight to one idle
    /// connection's task: one wake-up per request, so that the load generator itself adds
    /// little to what it measures on a machine it shares with the server.
    pub async fn open_loop<C>(&self, connections: usize, rate: f64, seconds: f64, check: C) -> Result<OpenRun>
    where
        C: Fn(usize, StatusCode, &[u8], &mut Tally) -> Result<()> + Clone + Send + 'static,
    {
        let total = (rate * seconds).round() as usize;
        let (idle, idle_connections) = std::sync::mpsc::channel::<usize>();
        let mut jobs = Vec::new();
        let mut workers = JoinSet::new();
        for connection in 0..connections {
            let mut sender = self.target.connect().await?;
            let (job_sender, mut job_receiver) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
            jobs.push(job_sender);
            let (target, endpoint, bodies) = (self.target.clone(), self.endpoint.clone(), self.bodies.clone());
            let (idle, check) = (idle.clone(), check.clone());
            idle.send(connection)?;
            workers.spawn(async move {
                let (mut latencies, mut send_lag, mut tally) = (Vec::new(), Vec::new(), Tally::default());
                while let Some((index, scheduled)) = job_receiver.recv().await {
                    let index = index % bodies.len();
                    send_lag.push((Instant::now() - scheduled).as_secs_f64() * 1000.0);
                    let (status, response) = target.call(&mut sender, &endpoint, bodies[index].clone()).await?;
                    latencies.push((Instant::now() - scheduled).as_secs_f64() * 1000.0);
                    check(index, status, &response, &mut tally)?;
                    // The dispatcher is gone once every request is handed out.
                    let _ = idle.send(connection);
                }
                anyhow::Ok((latencies, send_lag, tally))
            });
        }
        drop(idle);
        let cpu_before = CpuTimes::now();
        let start = Instant::now() + Duration::from_millis(20);
        let dispatcher = std::thread::spawn(move || {
            for index in 0..total {
                let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
                let now = Instant::now();
                if scheduled > now {
                    std::thread::sleep(scheduled - now);
                }
                let Ok(connection) = idle_connections.recv() else {
                    return;
                };
                if jobs[connection].send((index, scheduled)).is_err() {
                    return;
                }
            }
        });
        let mut result = OpenRun {
            rate,
            achieved: 0.0,
            latencies: Vec::new(),
            send_lag: Vec::new(),
            tally: Tally::default(),
            steal: None,
        };
        for (latencies, send_lag, tally) in join_all(workers).await? {
            result.latencies.extend(latencies);
            result.send_lag.extend(send_lag);
            result.tally.merge(tally);
        }
        let seconds = (Instant::now() - start).as_secs_f64();
        dispatcher
            .join()
            .map_err(|_| anyhow::anyhow!("the dispatcher thread panicked"))?;
        result.achieved = result.latencies.len() as f64 / seconds;
        result.steal = cpu_before
            .zip(CpuTimes::now())
            .map(|(before, after)| before.steal_share(after));
        ensure!(
            result.latencies.len() == total,
            "{} of {total} requests answered",
            result.latencies.len()
        );
        Ok(result)
    }
}

/// Runs `worker(connection index, connection)` as a task on each of `connections` at
/// once and returns what they returned, in the order they finished; the first error
/// ends them all.
pub async fn on_connections<T, W, F>(connections: Vec<Connection>, mut worker: W) -> Result<Vec<T>>
where
    W: FnMut(usize, Connection) -> F,
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut workers = JoinSet::new();
    for (index, connection) in connections.into_iter().enumerate() {
        workers.spawn(worker(index, connection));
    }
    join_all(workers).await
}

/// Waits for every task; an early return drops the JoinSet, which aborts the others.
async fn join_all<T: 'static>(mut workers: JoinSet<Result<T>>) -> Result<Vec<T>> {
    let mut outputs = Vec::with_capacity(workers.len());
    while let Some(joined) = workers.join_next().await {
        outputs.push(joined??);
    }
    Ok(outputs)
}
