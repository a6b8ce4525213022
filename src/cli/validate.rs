//! `sluice validate`.
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {}

pub fn run(_args: ValidateArgs) -> u8 {
    2
}
