//! `scripts/bench-ab.py`, the comparison of two builds of a benchmark by alternated runs: run on
//! two stand-in "benchmarks" (shell scripts printing fixed timings), it must report each
//! timing's medians, the median per-pair ratio and the pairs won, and fail loudly on a failed
//! run or a timing missing from one.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An executable shell script in `dir` that prints `text` and exits with `code`; it also
/// appends its name to `dir/order`, so the order of the runs can be checked.
fn fake_bench(dir: &Path, name: &str, text: &str, code: i32) -> PathBuf {
    let path = dir.join(name);
    let order = dir.join("order");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho {name} >> '{}'\ncat <<'EOF'\n{text}\nEOF\nexit {code}\n",
            order.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn bench_ab(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-ab.py"))
        .args(args)
        .output()
        .expect("run python3 scripts/bench-ab.py")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn reports_medians_ratios_and_pairs_won() {
    let dir = tempfile::tempdir().unwrap();
    let base = fake_bench(
        dir.path(),
        "base",
        "1000 objects:\n  build alone   10.00 ms\n  full rebuild: 20.0 ms = dag 5 + encode 15\n\
         10000 objects:\n  build alone   100.00 ms\nno timing here 3 s",
        0,
    );
    let new = fake_bench(
        dir.path(),
        "new",
        "1000 objects:\n  build alone   5.00 ms\n  full rebuild: 30.0 ms = dag 5 + encode 25\n\
         10000 objects:\n  build alone   80.00 ms\nno timing here 1 s",
        0,
    );
    let out = bench_ab(&[
        "--pairs",
        "3",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "--",
        "--bench",
    ]);
    assert!(out.status.success(), "{out:?}");
    let table = stdout(&out);
    for row in [
        "| build alone | 10.00 | 5.00 | 0.500 | 3 of 3 |",
        "| full rebuild | 20.00 | 30.00 | 1.500 | 0 of 3 |",
        "| build alone #2 | 100.00 | 80.00 | 0.800 | 3 of 3 |",
    ] {
        assert!(table.contains(row), "{row:?} not in:\n{table}");
    }
    assert!(!table.contains("no timing"), "{table}");
    // Alternated: base first, then new first, then base first.
    let order = std::fs::read_to_string(dir.path().join("order")).unwrap();
    assert_eq!(order, "base\nnew\nnew\nbase\nbase\nnew\n");

    let only = bench_ab(&[
        "--pairs",
        "1",
        "--match",
        "^full",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    assert!(only.status.success(), "{only:?}");
    assert!(stdout(&only).contains("| full rebuild |"));
    assert!(!stdout(&only).contains("build alone"));
}

#[test]
fn a_failed_run_or_a_missing_timing_fails_the_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let good = fake_bench(dir.path(), "good", "build 1.0 ms\nencode 2.0 ms", 0);
    let failing = fake_bench(dir.path(), "failing", "build 1.0 ms", 3);
    let partial = fake_bench(dir.path(), "partial", "build 1.0 ms", 0);
    let silent = fake_bench(dir.path(), "silent", "nothing timed", 0);
    let compare = |pairs: &str, base: &Path, new: &Path| {
        bench_ab(&[
            "--pairs",
            pairs,
            base.to_str().unwrap(),
            new.to_str().unwrap(),
        ])
    };
    for (new, expect) in [
        (&failing, "exited with 3"),
        (&partial, "'encode' is missing"),
    ] {
        let out = compare("1", &good, new);
        assert!(!out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{expect:?} not in {err}");
    }
    let out = compare("1", &silent, &silent);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no timing found"));
    let out = compare("0", &good, &good);
    assert!(!out.status.success());
}
