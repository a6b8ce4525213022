#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}
