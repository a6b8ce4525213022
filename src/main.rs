// The one unsafe call of sluice is the allocator's own API, below; the library forbids unsafe code.
#![deny(unsafe_code)]

// mimalloc: the rebuild after every change allocates and frees many small objects (the routing
// model, xDS resources); glibc's allocator spent ~40% of a 10k-object rebuild in malloc/free.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Gives the memory mimalloc holds freed back to the operating system now, instead of at its next
/// allocations (see `sluice::app::set_release_memory`).
#[allow(unsafe_code)]
fn release_memory() {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() -> std::process::ExitCode {
    sluice::app::set_release_memory(release_memory);
    sluice::cli::main()
}
