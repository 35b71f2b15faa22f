//! `loadring simulate`: the same requests against several policies, in
//! virtual time, to show what each does to load, locality and churn.
//!
//! - `args`: the flags and their validation.
//! - `policy`, `plot_format`: what the flags choose that every stage shares.
//! - `workload`: the seeded trace of arrivals, keys and service times.
//! - `engine`: the discrete-event loop around the real `Balancer`.
//! - `timeline`: in flight per endpoint over time, for the plot.
//! - `report`, `json`, `plot`: the three ways to show the outcome;
//!   `plot_file` draws a plot in memory and writes it.

mod args;
mod engine;
mod fleet;
mod json;
mod plot;
mod plot_file;
mod plot_format;
mod policy;
mod report;
mod scenario;
mod scenario_plot;
mod scenario_report;
mod timeline;
mod workload;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use args::Config;
pub use args::{Args, LONG_ABOUT};
use engine::{Outcome, Setup};
use plot_format::PlotFormat;
use workload::Trace;

use crate::CliError;

pub fn run(args: Args) -> Result<(), CliError> {
    if let Some(config) = args.scenario()? {
        return run_scenario(&config);
    }
    let config = args.config()?;
    let started = Instant::now();
    let trace = Trace::generate(
        config.requests,
        config.keys,
        config.workload,
        config.rate,
        config.service,
        config.seed,
    )
    .with_zones(&config.zones, config.seed);
    let setup = Setup::new(&trace, &config.endpoints, &config.events);
    if let (Some(k), Some(delay)) = (config.balancers, config.load_report) {
        let rows = fleet::run_reports(&config, &setup, k, delay)?;
        let text = if config.json {
            fleet::json_reports(delay, &rows)
        } else {
            fleet::render_reports(&config, &setup, delay, &rows)
        };
        return write_out(&text);
    }
    if let Some(k) = config.balancers {
        let rows = fleet::run_all(&config, &setup, k)?;
        let text = if config.json {
            fleet::json(&rows)
        } else {
            fleet::render(&config, &setup, &rows)
        };
        return write_out(&text);
    }
    let outcomes = run_all(&config, &setup)?;
    let wall = started.elapsed().as_secs_f64();

    let text = if config.json {
        json::render(&config, &setup, &outcomes, wall)
    } else {
        report::render(&config, &setup, &outcomes, wall)
    };
    write_out(&text)?;
    if let Some((path, format)) = &config.plot {
        let picture = plot::Plot {
            config: &config,
            setup: &setup,
            outcomes: &outcomes,
        };
        write_plot(path, *format, &picture)?;
        if !config.json {
            // With --json, stderr stays empty in a pipe (docs/simulate.md).
            eprintln!("plot written to {}", path.display());
        }
    }
    Ok(())
}

/// `--scenario`: every policy in the latency model, then the table or JSON
/// and the plot.
fn run_scenario(config: &scenario::Config) -> Result<(), CliError> {
    let results = scenario::run_all(config)?;
    let text = if config.json {
        scenario_report::render_json(config, &results)
    } else {
        scenario_report::render(config, &results)
    };
    write_out(&text)?;
    if let Some((path, format)) = &config.plot {
        let picture = scenario_plot::Plot {
            config,
            results: &results,
        };
        write_plot(path, *format, &picture)?;
        if !config.json {
            // With --json, stderr stays empty in a pipe (docs/simulate.md).
            eprintln!("plot written to {}", path.display());
        }
    }
    Ok(())
}

/// Writes the report; a reader that went away early is not an error.
/// `--plot`: the picture drawn, then written.
fn write_plot(
    path: &Path,
    format: PlotFormat,
    picture: &impl plot_file::Picture,
) -> Result<(), CliError> {
    let bytes = plot_file::render(format, picture).map_err(|e| {
        CliError(format!(
            "--plot {}: could not draw the plot: {e}",
            crate::echo::echo(&path.display().to_string())
        ))
    })?;
    plot_file::write(path, &bytes)
}

fn write_out(text: &str) -> Result<(), CliError> {
    let mut out = crate::output::stdout();
    crate::output::written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// Runs every policy, on as many threads as there are cores (they share
/// nothing but the read-only trace); results come back in policy order.
fn run_all(config: &Config, setup: &Setup<'_>) -> Result<Vec<Outcome>, CliError> {
    let policies = &config.policies;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(policies.len());
    let bar = progress_bar((config.requests * policies.len()) as u64);
    let report = |n: u64| bar.inc(n);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome, CliError>>>> =
        Mutex::new((0..policies.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(policy) = policies.get(i) else {
                    return;
                };
                let outcome = engine::simulate(policy, setup, &report);
                // A poisoned lock means another worker panicked; the panic
                // is re-raised when the scope ends.
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(outcome);
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        // Every index below the policy count was taken by some worker.
        .map(|r| r.expect("every policy ran"))
        .collect()
}

/// A bar on stderr when it is a terminal; nothing in pipes and CI.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "simulating {wide_bar} {human_pos}/{human_len} picks, {eta} left",
    ) {
        bar.set_style(style);
    }
    bar
}
