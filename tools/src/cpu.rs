//! CPU time from `/proc`: of a process, of this tool's own threads, and of the whole
//! machine (to tell how much of a span the hypervisor gave to other guests).

use std::path::Path;

/// Clock ticks per second of `/proc` CPU times (USER_HZ, fixed at 100 on Linux).
const USER_HZ: f64 = 100.0;

/// The name and the CPU time (user + system, seconds) of a `/proc/.../stat` file: a
/// process's (all its threads, exited ones included) or one thread's.
fn stat_cpu(path: &Path) -> Option<(String, f64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let name = stat.get(open + 1..close)?.to_owned();
    // After the name: state (field 3) ... utime (field 14), stime (field 15).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((name, ticks as f64 / USER_HZ))
}

/// CPU seconds used so far by process `pid`.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu(Path::new(&format!("/proc/{pid}/stat"))).map(|(_, seconds)| seconds)
}

/// CPU seconds used so far by this process, and by those of its live threads named `name`.
pub fn own_cpu_seconds(name: &str) -> Option<(f64, f64)> {
    let (_, all) = stat_cpu(Path::new("/proc/self/stat"))?;
    let mut named = 0.0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        if let Some((thread, seconds)) = stat_cpu(&task.path().join("stat")) {
            if thread == name {
                named += seconds;
            }
        }
    }
    Some((all, named))
}

/// The machine's CPU time counters (the `cpu` line of `/proc/stat`), to tell how much
/// of a span the hypervisor gave to other guests (steal) on a shared virtual machine.
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    /// user, nice, system, idle, iowait, irq, softirq and steal, in clock ticks.
    total: u64,
    steal: u64,
}

impl CpuTimes {
    /// `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let counters: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|field| field.parse().ok())
            .collect::<Option<_>>()?;
        (counters.len() == 8).then(|| CpuTimes {
            total: counters.iter().sum(),
            steal: counters[7],
        })
    }

    /// The share of all CPU time from `self` to `later` that was stolen.
    pub fn steal_share(self, later: CpuTimes) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        later.steal.saturating_sub(self.steal) as f64 / total as f64
    }
}
