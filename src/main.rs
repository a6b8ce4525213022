#![forbid(unsafe_code)]

// jemalloc: the rebuild after every change allocates and frees many small objects (the routing
// model, xDS resources); glibc's allocator spent ~40% of a 10k-object rebuild in malloc/free and
// kept freed memory in per-thread arenas. jemalloc (configured in .cargo/config.toml) keeps the
// heap compact and gives freed pages back from a background thread (docs/cluster-mode.md).
// The `system-allocator` feature (heap profiling only, Cargo.toml) leaves glibc's malloc in place.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
