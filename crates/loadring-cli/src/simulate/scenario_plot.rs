//! `--scenario ... --plot FILE.svg|FILE.png`: on top, the bad endpoint's
//! share of the requests over time, one line per policy, against its fair
//! share and the bad period; below, for `slow-backend` each policy's p99
//! latency in the scenario next to its p99 without the bad period, for
//! `failing-backend` each policy's errors.

use std::error::Error;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::plot_file::{self, FONT};
use super::scenario::{self, Config, Kind, Result, BAD_FROM, BAD_TO, ENDPOINTS, WINDOW};

/// Tableau 10, one colour per policy.
const COLORS: [RGBColor; 6] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(89, 161, 79),
    RGBColor(176, 122, 161),
    RGBColor(156, 117, 95),
];
const GREY: RGBColor = RGBColor(120, 120, 120);
const BAD_AREA: RGBColor = RGBColor(250, 228, 228);

type DrawResult = std::result::Result<(), Box<dyn Error>>;

/// The plot of a run, drawn by [`plot_file::render`].
pub struct Plot<'a> {
    pub config: &'a Config,
    pub results: &'a [Result],
}

impl plot_file::Picture for Plot<'_> {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        picture(root, self.config, self.results)
    }
}

fn picture<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    config: &Config,
    results: &[Result],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(620);
    shares(&top, config, results)?;
    match config.kind {
        Kind::SlowBackend => p99s(&bottom, results)?,
        Kind::FailingBackend => errors(&bottom, results)?,
    }
    Ok(())
}

fn shares<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    config: &Config,
    results: &[Result],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let windows = results.first().map_or(0, |r| r.scenario.share.len());
    let window_s = WINDOW as f64 / 1e9;
    let xmax = windows as f64 * window_s;
    let ymax = results
        .iter()
        .flat_map(|r| r.scenario.share.iter().copied())
        .fold(0.2f64, f64::max)
        * 100.0
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{}: share of requests placed on {} ({})",
                config.kind.name(),
                scenario::addr(scenario::BAD),
                config.kind.story()
            ),
            (FONT, 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [(BAD_FROM as f64 / 1e9, 0.0), (BAD_TO as f64 / 1e9, ymax)],
        BAD_AREA.filled(),
    )))?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc(format!("% of requests ({} ms windows)", WINDOW / 1_000_000))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let fair = 100.0 / ENDPOINTS as f64;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, fair), (xmax, fair)],
            8,
            5,
            GREY.stroke_width(2),
        ))?
        .label("fair share")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], GREY.stroke_width(2)));
    for (k, r) in results.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                r.scenario
                    .share
                    .iter()
                    .enumerate()
                    .map(|(w, s)| ((w as f64 + 0.5) * window_s, s * 100.0)),
                color.stroke_width(3),
            ))?
            .label(r.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

fn p99s<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, results: &[Result]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = results.len();
    // A log scale: the slow backend's p99 under rr is orders above the rest.
    let ymax = results
        .iter()
        .map(|r| r.scenario.p99_ms.max(r.baseline.p99_ms))
        .fold(1.0f64, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            "p99 latency (ms, log scale): scenario (solid) and without the bad period (light)",
            (FONT, 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n as f64, (0.5f64..ymax).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .label_style((FONT, 14))
        .draw()?;
    for (k, r) in results.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let x = k as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x + 0.15, 0.5), (x + 0.5, r.scenario.p99_ms.max(0.5))],
            color.filled(),
        )))?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x + 0.5, 0.5), (x + 0.85, r.baseline.p99_ms.max(0.5))],
            color.mix(0.35).filled(),
        )))?;
        // The policy's name at the top of its pair of bars.
        chart.draw_series(std::iter::once(Text::new(
            r.name.clone(),
            (x + 0.15, ymax / 1.6),
            (FONT, 14).into_font().color(&color),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{:.1}", r.scenario.p99_ms),
            (x + 0.18, r.scenario.p99_ms.max(0.5) * 1.15),
            (FONT, 14).into_font(),
        )))?;
    }
    Ok(())
}

fn errors<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, results: &[Result]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = results.len();
    let ymax = results
        .iter()
        .map(|r| r.scenario.errors as f64)
        .fold(10.0f64, f64::max)
        * 1.3;
    let mut chart = ChartBuilder::on(area)
        .caption("failed requests", (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .label_style((FONT, 14))
        .draw()?;
    for (k, r) in results.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let x = k as f64;
        let errors = r.scenario.errors as f64;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x + 0.2, 0.0), (x + 0.8, errors)],
            color.filled(),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{}: {}", r.name, r.scenario.errors),
            (x + 0.1, errors + ymax * 0.08),
            (FONT, 14).into_font().color(&color),
        )))?;
    }
    Ok(())
}
