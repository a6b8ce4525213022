//! `sluice crds`: prints the CRDs (the checked-in `crds/` is its output).

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct CrdsArgs {}

pub fn run(_args: CrdsArgs) -> u8 {
    for (_, crd) in crate::api::crds::all() {
        print!("{}", crate::api::crds::render(&crd));
    }
    0
}
