//! `sluice routes`.
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct RoutesArgs {}

pub fn run(_args: RoutesArgs) -> u8 {
    2
}
