//! Shared by the benchmarks that read a running program's CPU time and memory from /proc.

use std::collections::BTreeMap;

/// CPU seconds by name of the processes (`/proc`) or threads (`/proc/PID/task`) listed in `dir`.
pub fn cpu_by_name(dir: &std::path::Path) -> BTreeMap<String, f64> {
    let mut cpu = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(dir) else {
        return cpu;
    };
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid … utime stime: fields 14 and 15, counted after the comm.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        *cpu.entry(comm).or_insert(0.0) += (ticks(11) + ticks(12)) / 100.0;
    }
    cpu
}

/// A field of a process's /proc status in MiB (VmRSS, VmHWM, RssAnon, RssFile).
pub fn status_mib(pid: u32, name: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// (VmRSS, VmHWM) of a process in MiB.
pub fn rss_mib(pid: u32) -> (f64, f64) {
    (status_mib(pid, "VmRSS"), status_mib(pid, "VmHWM"))
}

/// CPU seconds (user + system) a process has used so far, all its threads.
pub fn cpu_seconds(pid: u32) -> f64 {
    cpu_by_name(format!("/proc/{pid}/task").as_ref())
        .values()
        .sum()
}

/// The minor page faults a process has taken so far, all its threads (`minflt` of
/// /proc/PID/stat): each a page of memory it touched for the first time, or again after giving
/// it back.
pub fn minor_faults(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt …: the eighth field after the comm.
    let after = stat.rfind(')').map_or("", |close| &stat[close + 1..]);
    (after.split_whitespace().nth(7))
        .and_then(|f| f.parse().ok())
        .unwrap_or(f64::NAN)
}
