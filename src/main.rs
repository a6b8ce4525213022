#![forbid(unsafe_code)]

// mimalloc: the rebuild after every change allocates and frees many small objects (the routing
// model, xDS resources); glibc's allocator spent ~40% of a 10k-object rebuild in malloc/free.
// The `system-allocator` feature (heap profiling only, Cargo.toml) leaves glibc's malloc in place.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
