//! The benchmark's plot: per proxy, the highest peak concurrency of a backend
//! over the mean peak, the hottest backend's concurrency over the mean
//! (time-averaged), and p99 latency; one bar per workload. PNG, with the embedded DejaVu Sans (no
//! system fonts needed).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::report::Row;

const FONT: &str = "gatebench-sans";
const COLORS: [RGBColor; 3] = [
    RGBColor(60, 110, 180),
    RGBColor(210, 90, 40),
    RGBColor(90, 160, 80),
];

pub fn draw(path: &Path, rows: &[Row]) -> Result<(), String> {
    static FONTS: Once = Once::new();
    FONTS.call_once(|| {
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
    let root = BitMapBackend::new(path, (1800, 600)).into_drawing_area();
    picture(&root, rows).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn picture<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let mut proxies: Vec<&str> = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows {
        if !proxies.contains(&r.proxy.as_str()) {
            proxies.push(&r.proxy);
        }
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let panels = root.split_evenly((1, 3));
    panel(
        &panels[1],
        rows,
        &proxies,
        &workloads,
        "hottest / mean backend concurrency (time-averaged)",
        |r| r.hot_over_mean,
    )?;
    panel(
        &panels[0],
        rows,
        &proxies,
        &workloads,
        "peak concurrency per backend / mean peak",
        |r| r.peak_over_mean,
    )?;
    panel(
        &panels[2],
        rows,
        &proxies,
        &workloads,
        "p99 latency (ms)",
        |r| r.p99_ms,
    )?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    proxies: &[&str],
    workloads: &[&str],
    title: &str,
    value: impl Fn(&Row) -> f64,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    // Horizontal bars: proxies down the left, the first at the top.
    let top = rows.iter().map(&value).fold(0.0, f64::max).max(1.0) * 1.25;
    let n = proxies.len();
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(190)
        .build_cartesian_2d(0.0..top, 0.0..n as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n * 2 + 1)
        .y_label_formatter(&|y| {
            let i = y.floor() as usize;
            if (y - y.floor() - 0.5).abs() < 1e-6 && i < n {
                proxies[n - 1 - i].to_string()
            } else {
                String::new()
            }
        })
        .y_label_style((FONT, 13))
        .x_label_style((FONT, 13))
        .draw()?;
    let height = 0.8 / workloads.len().max(1) as f64;
    for (w, workload) in workloads.iter().enumerate() {
        let color = COLORS[w % COLORS.len()];
        let bars = rows
            .iter()
            .filter(|r| r.workload == *workload)
            .filter_map(|r| {
                let i = (n - 1 - proxies.iter().position(|p| *p == r.proxy)?) as f64;
                let y1 = i + 0.9 - w as f64 * height;
                Some(Rectangle::new(
                    [(0.0, y1 - height * 0.95), (value(r), y1)],
                    color.filled(),
                ))
            });
        chart
            .draw_series(bars)?
            .label(*workload)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
