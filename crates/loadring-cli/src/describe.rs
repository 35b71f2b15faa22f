//! `loadring describe`: how evenly a hashing policy divides the hash space.

use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;

use crate::endpoints::Target;
use crate::CliError;

/// Prints each endpoint's share of the hash space, its fair share (its
/// weight over the total weight; for the policies that ignore weights,
/// dubbo, pixiu_ring and ketama:weighted=false, an equal part of each
/// endpoint of weight >= 1), the ratio of the two and the deviation (the
/// population standard deviation of that ratio; brpc's deviation of
/// `share * N` for equal weights). Endpoints of weight >= 1 that the policy's
/// arithmetic gives no share are flagged `NO SHARE`: no key reaches them.
/// With --json, fractions are rounded to 12 decimals (the float noise of
/// summed arcs left out).
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
    /// Whether the policy sizes endpoints' parts by weight (else the fair
    /// share is an equal part of each endpoint of weight >= 1).
    weighs: bool,
    endpoints: Vec<Share>,
    #[serde(serialize_with = "rounded")]
    deviation: f64,
    #[serde(serialize_with = "rounded")]
    max_over_mean: f64,
    /// Endpoints of weight >= 1 with share 0.
    unreached: usize,
}

#[derive(Serialize)]
struct Share {
    addr: String,
    tag: Option<String>,
    weight: u32,
    #[serde(serialize_with = "rounded")]
    share: f64,
    #[serde(serialize_with = "rounded")]
    share_times_n: f64,
    #[serde(serialize_with = "rounded")]
    fair_share: f64,
    /// `share / fair_share`; `null` for weight 0.
    #[serde(serialize_with = "rounded_some")]
    share_over_fair: Option<f64>,
    /// Weight >= 1 and share 0: no key reaches it.
    unreached: bool,
}

pub fn run(args: Args) -> Result<(), CliError> {
    let (spec, endpoints) = args.target.parse()?;
    let text = spec.as_str().to_string();
    // The policy that places (the innermost of a locality chain) is the one
    // that has a hash space or not.
    let mut placing = &spec;
    while let Some(inner) = placing.inner() {
        placing = inner;
    }
    let name = placing.name();
    let balancer = crate::endpoints::balancer(spec, endpoints)?;
    let layout = balancer.layout()?.ok_or_else(|| {
        CliError(format!(
            "describe: {name} does not place requests by hash, so it has no hash space to describe"
        ))
    })?;
    // N of brpc's `share * N`: the endpoints that take keys (weight 0 is
    // drained, owed nothing).
    let n = layout
        .shares()
        .iter()
        .filter(|(e, _)| e.weight() > 0)
        .count() as f64;
    let endpoints: Vec<Share> = layout
        .shares()
        .iter()
        .zip(layout.fair_shares())
        .zip(layout.share_over_fair())
        .map(|(((e, share), fair_share), share_over_fair)| Share {
            addr: e.addr().to_string(),
            tag: e.tag().map(str::to_string),
            weight: e.weight(),
            share: *share,
            share_times_n: share * n,
            fair_share,
            share_over_fair,
            unreached: e.weight() > 0 && *share == 0.0,
        })
        .collect();
    let report = Report {
        policy: text,
        entries: layout.entries(),
        entry_label: layout.entry_label(),
        weighs: layout.weighs(),
        unreached: endpoints.iter().filter(|e| e.unreached).count(),
        endpoints,
        deviation: layout.deviation(),
        max_over_mean: layout.max_over_mean(),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        table(&report)?
    };
    let mut out = crate::output::stdout();
    crate::output::written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// Decimals of the fractions `--json` prints: a part in a trillion, far
/// finer than the table's 0.001% (and than a 32-bit ring's code, 2.3e-10),
/// far coarser than the error of a sum of arcs in f64 (1e-16 or so):
/// rounded, an endpoint that owns the whole space prints 1.0, not
/// 1.0000000000000002, and a third 0.333333333333 whatever the sum.
const JSON_DECIMALS: i32 = 12;

/// `x` rounded to [`JSON_DECIMALS`] decimals (a value too large to have
/// that many is left as is).
fn round(x: f64) -> f64 {
    let scale = 10f64.powi(JSON_DECIMALS);
    let scaled = x * scale;
    if scaled.abs() < 2f64.powi(53) {
        scaled.round() / scale
    } else {
        x
    }
}

fn rounded<S: serde::Serializer>(x: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(round(*x))
}

fn rounded_some<S: serde::Serializer>(x: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    x.map(round).serialize(serializer)
}

/// The endpoint's address, and its tag when another endpoint has the same
/// address (the tag is then what tells them apart).
fn label(e: &Share, all: &[Share]) -> String {
    match &e.tag {
        Some(tag) if all.iter().filter(|o| o.addr == e.addr).count() > 1 => {
            format!("{} tag={tag}", e.addr)
        }
        _ => e.addr.clone(),
    }
}

/// The report as the table a person reads.
fn table(r: &Report) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    writeln!(out, "policy     {}", r.policy)?;
    writeln!(out, "{:<10} {}", r.entry_label, r.entries)?;
    if !r.weighs {
        writeln!(
            out,
            "{:<10} an equal part each: the policy gives every endpoint of weight >= 1 as many {}, \
             whatever its weight",
            "fair", r.entry_label
        )?;
    }
    writeln!(out)?;
    let labels: Vec<String> = r.endpoints.iter().map(|e| label(e, &r.endpoints)).collect();
    let width = labels
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max("endpoint".len());
    writeln!(
        out,
        "{:<width$}  {:>6}  {:>8}  {:>8}  {:>10}",
        "endpoint", "weight", "share", "fair", "share/fair"
    )?;
    for (e, label) in r.endpoints.iter().zip(&labels) {
        let ratio = e
            .share_over_fair
            .map_or_else(|| "-".to_string(), |x| format!("{x:.4}"));
        let flag = if e.unreached { "  NO SHARE" } else { "" };
        writeln!(
            out,
            "{label:<width$}  {:>6}  {:>7.3}%  {:>7.3}%  {ratio:>10}{flag}",
            e.weight,
            e.share * 100.0,
            e.fair_share * 100.0,
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "deviation      {:.4}  (population std dev of share/fair over endpoints of weight >= 1; 0 is a perfect split)",
        r.deviation
    )?;
    writeln!(out, "max share/fair {:.4}", r.max_over_mean)?;
    if r.unreached > 0 {
        writeln!(
        out,
            "NO SHARE       {} endpoint(s) of weight >= 1 own no part of the hash space: the policy's \
             arithmetic gives them no {}, so no key reaches them",
            r.unreached, r.entry_label
        )?;
    }
    Ok(out)
}
