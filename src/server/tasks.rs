//! The tasks a node's stages spawn, each with its stage and its name, and their end:
//! every task watches the node's one shutdown token and ends by itself once it is
//! cancelled; a stopping stage awaits its tasks, within a bound.

use std::future::Future;
use std::ops::AddAssign;
use std::time::Duration;

use tokio::task::JoinHandle;

/// One task of a stage.
struct StageTask {
    /// What the task does, for the logs (`checkpoints`, `kafka consumer`, ...).
    name: &'static str,
    /// Awaited at stop: the task ends by itself once the shutdown token is cancelled.
    handle: JoinHandle<()>,
}

/// The tasks one stage spawned, awaited when the stage stops.
pub(super) struct StageTasks {
    /// The stage's name in the logs (`http`, `stream`, `engine`, ...).
    pub(super) stage: &'static str,
    /// In the order they were spawned.
    tasks: Vec<StageTask>,
}

/// How the tasks of one or more stages ended.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct TaskTally {
    /// Tasks that ended (by themselves, once told to stop).
    pub(super) ended: usize,
    /// Tasks still running when their bound ran out (then aborted, the last resort).
    pub(super) still_running: usize,
}

impl AddAssign for TaskTally {
    fn add_assign(&mut self, other: TaskTally) {
        self.ended += other.ended;
        self.still_running += other.still_running;
    }
}

impl StageTasks {
    pub(super) fn new(stage: &'static str) -> StageTasks {
        StageTasks {
            stage,
            tasks: Vec::new(),
        }
    }

    /// Spawns `work`, which must end by itself once the node's shutdown token is
    /// cancelled.
    pub(super) fn spawn(&mut self, name: &'static str, work: impl Future<Output = ()> + Send + 'static) {
        self.adopt(name, tokio::spawn(work));
    }

    /// Takes on a task another module's start function spawned, given the same token.
    pub(super) fn adopt(&mut self, name: &'static str, handle: JoinHandle<()>) {
        self.tasks.push(StageTask { name, handle });
    }

    /// Awaits every task (the shutdown token is cancelled before) for at most `limit`
    /// in all. A task still running then is logged and aborted: the last resort for a
    /// task stuck where it cannot see the token (a broker that never answers).
    pub(super) async fn join(self, limit: Duration) -> TaskTally {
        let deadline = tokio::time::Instant::now() + limit;
        let mut tally = TaskTally::default();
        for StageTask { name, mut handle } in self.tasks {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(())) => tally.ended += 1,
                Ok(Err(error)) => {
                    tracing::error!(stage = self.stage, task = name, %error, "a task of the node failed");
                    tally.ended += 1;
                }
                Err(_) => {
                    tracing::error!(
                        stage = self.stage,
                        task = name,
                        limit_ms = limit.as_millis() as u64,
                        "a task did not stop in time; aborting it"
                    );
                    handle.abort();
                    tally.still_running += 1;
                }
            }
        }
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn tasks_that_watch_the_token_end_and_one_that_does_not_is_counted() {
        let shutdown = CancellationToken::new();
        let mut tasks = StageTasks::new("test");
        for _ in 0..3 {
            let shutdown = shutdown.clone();
            tasks.spawn("watching", async move { shutdown.cancelled().await });
        }
        tasks.spawn("deaf", std::future::pending());
        shutdown.cancel();
        // The bound runs out only for the task that never looks at the token.
        let tally = tasks.join(Duration::from_millis(100)).await;
        assert_eq!((tally.ended, tally.still_running), (3, 1));
    }
}
