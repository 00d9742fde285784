//! `vigil bench …`: benchmarks that print figures.

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Creates per second and watch delivery latency against a fresh sandbox.
    Sandbox,
}

pub async fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Sandbox => anyhow::bail!("the sandbox benchmark is not available yet"),
    }
}
