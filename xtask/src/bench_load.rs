//! Noise accounting for `cargo xtask bench` on a shared machine (Linux; elsewhere nothing is
//! measured), as the reference's `run-all.mjs` does it: before a run, wait (at most
//! `--max-wait` s) until other processes use less than `--quiet` cores; for each run, record
//! the cores other processes used while it ran ("others' load": busy CPU time from `/proc/stat`
//! minus the case's own user+system time (`cpuS`, which the case reports) and minus the SSE server's, which is recorded apart).

use std::time::{Duration, Instant};

/// Jiffies per second of `/proc/stat` and `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
const HZ: f64 = 100.0;

/// Busy and total jiffies of all cores, from `/proc/stat`.
#[derive(Clone, Copy)]
pub struct CpuTicks {
    busy: u64,
    total: u64,
}

/// The machine's CPU counters now; `None` without `/proc/stat`.
pub fn cpu_ticks() -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> =
        stat.lines().next()?.split_whitespace().skip(1).take(8).filter_map(|f| f.parse().ok()).collect();
    let total: u64 = fields.iter().sum();
    let idle = fields.get(3)? + fields.get(4)?;
    Some(CpuTicks { busy: total - idle, total })
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// Cores used by the whole machine between two readings.
fn cores_between(a: CpuTicks, b: CpuTicks, busy: f64) -> f64 {
    let total = b.total.saturating_sub(a.total) as f64;
    if total == 0.0 {
        return 0.0;
    }
    busy / total * cores()
}

/// Wait until the machine uses less than `quiet` cores over one second, at most `max_wait`;
/// returns the seconds waited.
pub fn wait_for_quiet(quiet: f64, max_wait: Duration) -> u64 {
    let started = Instant::now();
    while started.elapsed() < max_wait {
        let Some(a) = cpu_ticks() else { break };
        std::thread::sleep(Duration::from_secs(1));
        let Some(b) = cpu_ticks() else { break };
        if cores_between(a, b, b.busy.saturating_sub(a.busy) as f64) < quiet {
            break;
        }
    }
    started.elapsed().as_secs()
}

/// User + system CPU seconds of this process so far (0 when it cannot be read): each case
/// reports its own in its line (`cpuS`), read just before it prints.
pub fn own_cpu_s() -> f64 {
    process_ticks_at("/proc/self/stat") as f64 / HZ
}

/// User + system jiffies of a running process (the SSE server); 0 when it cannot be read.
pub fn process_ticks(pid: u32) -> u64 {
    process_ticks_at(&format!("/proc/{pid}/stat"))
}

fn process_ticks_at(path: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(path) else { return 0 };
    // Fields after the command name (which may hold spaces): #3 state, ... #14 utime, #15 stime.
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else { return 0 };
    let fields: Vec<&str> = rest.split(' ').collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

/// Others' load and the server's, in cores, over one run.
pub struct RunLoad {
    pub others_cores: f64,
    pub server_cores: Option<f64>,
}

/// The load of a run from the readings before and after it.
pub fn run_load(before: CpuTicks, after: CpuTicks, own_cpu_s: f64, server_ticks: Option<u64>) -> RunLoad {
    let busy = after.busy.saturating_sub(before.busy) as f64;
    let server = server_ticks.unwrap_or(0) as f64;
    let others = (busy - own_cpu_s * HZ - server).max(0.0);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    RunLoad {
        others_cores: round(cores_between(before, after, others)),
        server_cores: server_ticks.map(|_| round(cores_between(before, after, server))),
    }
}
