//! `loadring describe`: how evenly a hashing policy divides the hash space.

use loadring::Balancer;
use serde::Serialize;

use crate::endpoints::Target;
use crate::CliError;

/// Prints each endpoint's share of the hash space, `share * N` and brpc's
/// deviation (the population standard deviation of `share * N`).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    policy: String,
    entries: usize,
    entry_label: &'static str,
    endpoints: Vec<Share>,
    deviation: f64,
    max_over_mean: f64,
}

#[derive(Serialize)]
struct Share {
    addr: String,
    weight: u32,
    share: f64,
    share_times_n: f64,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let (spec, endpoints) = args.target.parse()?;
    let text = spec.as_str().to_string();
    let name = spec.name();
    let balancer = Balancer::new(spec, endpoints)?;
    let layout = balancer.layout()?.ok_or_else(|| {
        CliError(format!(
            "describe: {name} does not place requests by hash, so it has no hash space to describe"
        ))
    })?;
    let n = layout.shares().len() as f64;
    let report = Report {
        policy: text,
        entries: layout.entries(),
        entry_label: layout.entry_label(),
        endpoints: layout
            .shares()
            .iter()
            .map(|(e, s)| Share {
                addr: e.addr().to_string(),
                weight: e.weight(),
                share: *s,
                share_times_n: s * n,
            })
            .collect(),
        deviation: layout.deviation(),
        max_over_mean: layout.max_over_mean(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &Report) {
    println!("policy     {}", r.policy);
    println!("{:<10} {}", r.entry_label, r.entries);
    println!();
    let width = r
        .endpoints
        .iter()
        .map(|e| e.addr.len())
        .max()
        .unwrap_or(0)
        .max("endpoint".len());
    println!(
        "{:<width$}  {:>6}  {:>8}  {:>7}",
        "endpoint", "weight", "share", "share*N"
    );
    for e in &r.endpoints {
        println!(
            "{:<width$}  {:>6}  {:>7.3}%  {:>7.4}",
            e.addr,
            e.weight,
            e.share * 100.0,
            e.share_times_n
        );
    }
    println!();
    println!(
        "deviation      {:.4}  (population std dev of share*N; 0 is a perfect split)",
        r.deviation
    );
    println!("max share*N    {:.4}", r.max_over_mean);
}
