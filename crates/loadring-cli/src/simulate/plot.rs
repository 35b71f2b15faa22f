//! `--plot FILE.svg|FILE.png`: the run as a picture. On top, in flight per
//! endpoint over time for a plain ring and a bounded one side by side (same
//! scale); below, one bar chart per metric with a bar per policy.
//!
//! Drawn by `plot_file`, which holds the canvas's size and font.

use std::error::Error;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::args::{Change, Config};
use super::engine::{Outcome, Setup};
use super::plot_file::{self, FONT, SIZE};
use super::workload::{thousands, Workload};

/// Tableau 10: distinct at a glance, also for colour-blind readers.
const ENDPOINT_COLORS: [RGBColor; 10] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
    RGBColor(186, 176, 172),
];
const PLAIN: RGBColor = RGBColor(214, 69, 65);
const BOUNDED: RGBColor = RGBColor(46, 139, 87);
const OTHER: RGBColor = RGBColor(90, 110, 140);
const GREY: RGBColor = RGBColor(120, 120, 120);
const CAP: RGBColor = RGBColor(150, 20, 20);

type DrawResult = Result<(), Box<dyn Error>>;

/// The plot of a run, drawn by [`plot_file::render`].
pub struct Plot<'a> {
    pub config: &'a Config,
    pub setup: &'a Setup<'a>,
    pub outcomes: &'a [Outcome],
}

impl plot_file::Picture for Plot<'_> {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        picture(root, self.config, self.setup, self.outcomes)
    }
}

fn picture<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    config: &Config,
    setup: &Setup<'_>,
    outcomes: &[Outcome],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let title = format!(
        "loadring simulate: {} requests on {} endpoints; {}",
        thousands(config.requests as u64),
        config.endpoints.len(),
        config.workload.describe(config.keys)
    );
    let root = root.titled(&title, (FONT, 26).into_font().style(FontStyle::Bold))?;
    let (top, bottom) = root.split_vertically(SIZE.1 * 56 / 100);
    let (left, right) = top.split_horizontally(SIZE.0 / 2);
    let (plain, bounded) = pair(outcomes);
    let ymax = [plain, bounded]
        .iter()
        .flatten()
        .flat_map(|o| o.timeline.iter())
        .fold(1.0f32, |m, &v| m.max(v)) as f64
        * 1.08;
    let viral = matches!(config.workload, Workload::Hot { .. });
    if let Some(o) = plain {
        timeline(&left, o, setup, ymax, viral)?;
    }
    if let Some(o) = bounded {
        timeline(&right, o, setup, ymax, viral)?;
    }
    let (strip, bottom) = bottom.split_vertically(36);
    legend_strip(&strip)?;
    let bars = bottom.split_evenly((1, 3));
    let color = |o: &Outcome| match (bounded_spec(o), o.spec.is_hashing()) {
        (true, _) => BOUNDED,
        (false, true) => PLAIN,
        (false, false) => OTHER,
    };
    bar_chart(
        &bars[0],
        "peak in flight / mean (lower is better)",
        outcomes,
        &|o| o.max_over_mean,
        &|v| format!("{v:.2}x"),
        &color,
        None,
    )?;
    bar_chart(
        &bars[1],
        "locality: requests on the key's owner",
        outcomes,
        &|o| o.locality,
        &|v| format!("{:.0}%", v * 100.0),
        &color,
        None,
    )?;
    let ideal = outcomes.iter().find_map(|o| o.ideal_churn);
    let churn_title = match ideal {
        Some(i) => format!("keys moved at the change (ideal {:.0}%)", i * 100.0),
        None => "keys moved at the change (no change)".to_string(),
    };
    bar_chart(
        &bars[2],
        &churn_title,
        outcomes,
        &|o| o.churn,
        &|v| format!("{:.1}%", v * 100.0),
        &color,
        ideal,
    )?;
    Ok(())
}

/// The plain and the bounded policy to show over time: the first unbounded
/// hashing policy and the first bounded one (else the first two policies).
fn pair(outcomes: &[Outcome]) -> (Option<&Outcome>, Option<&Outcome>) {
    let plain = outcomes
        .iter()
        .find(|o| o.spec.is_hashing() && !bounded_spec(o));
    let bounded = outcomes.iter().find(|o| o.spec.load_factor().is_some());
    match (plain, bounded) {
        (Some(p), Some(b)) => (Some(p), Some(b)),
        _ => (outcomes.first(), outcomes.get(1)),
    }
}

/// Whether the policy bounds load: loadring's cap or Envoy's rule.
fn bounded_spec(o: &Outcome) -> bool {
    o.spec.load_factor().is_some() || o.spec.hash_balance_factor().is_some()
}

fn timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    o: &Outcome,
    setup: &Setup<'_>,
    ymax: f64,
    viral: bool,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let endpoints = setup.addrs.len();
    let windows = o.means.len();
    let seconds = |w: usize| (w as f64 + 0.5) * o.window_ns as f64 / 1e9;
    let xmax = windows as f64 * o.window_ns as f64 / 1e9;
    let caption = match o.spec.load_factor() {
        Some(f) => format!("{}: in flight per endpoint (cap {f}x the mean)", o.name),
        None => format!("{}: in flight per endpoint", o.name),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc("requests in flight (window average)")
        .x_label_formatter(&|v| tick(*v, xmax))
        .y_label_formatter(&|v| tick(*v, ymax))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for event in setup.events {
        let x = event.at as f64 / 1e9;
        let label = match &event.change {
            Change::Remove(addr) => format!("{addr} removed"),
            Change::Add(e) => format!("{} added", e.addr()),
        };
        chart.draw_series(DashedLineSeries::new(
            [(x, 0.0), (x, ymax)],
            6,
            4,
            GREY.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("  {label}"),
            (x, ymax * 0.97),
            (FONT, 15).into_font().color(&GREY),
        )))?;
    }
    for e in 0..endpoints {
        let color = ENDPOINT_COLORS[e % ENDPOINT_COLORS.len()];
        chart.draw_series(LineSeries::new(
            (0..windows).map(|w| (seconds(w), f64::from(o.timeline[w * endpoints + e]))),
            color.stroke_width(2),
        ))?;
    }
    chart
        .draw_series(LineSeries::new(
            (0..windows).map(|w| (seconds(w), f64::from(o.means[w]))),
            BLACK.stroke_width(3),
        ))?
        .label("mean per endpoint")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], BLACK.stroke_width(3)));
    if let Some(f) = o.spec.load_factor() {
        let f = f.as_f64();
        chart
            .draw_series(DashedLineSeries::new(
                (0..windows).map(|w| (seconds(w), f * f64::from(o.means[w]))),
                10,
                6,
                CAP.stroke_width(3),
            ))?
            .label(format!("cap: {f}x the mean"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], CAP.stroke_width(3)));
    }
    // Name the line that tells the story: the viral key's owner, else the
    // endpoint that served the most.
    let busiest = o.requests.iter().enumerate().max_by_key(|(_, &n)| n);
    let named = match (viral, o.key0_owner, busiest) {
        (true, Some(owner), _) => Some((owner, "owner of the viral key-0")),
        (_, _, Some((i, _))) => Some((i, "busiest")),
        _ => None,
    };
    if let Some((e, what)) = named {
        let color = ENDPOINT_COLORS[e % ENDPOINT_COLORS.len()];
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
            .label(format!("{what}: {}", setup.addrs[e]))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

/// Horizontal bars, one per policy (first policy on top); `None` shows `n/a`.
fn bar_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    outcomes: &[Outcome],
    value: &dyn Fn(&Outcome) -> Option<f64>,
    label: &dyn Fn(f64) -> String,
    color: &dyn Fn(&Outcome) -> RGBColor,
    mark: Option<f64>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = outcomes.len();
    let xmax = outcomes
        .iter()
        .filter_map(value)
        .chain(mark)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.3;
    let names: Vec<String> = outcomes.iter().map(|o| o.name.clone()).collect();
    let row = |i: usize| n - 1 - i;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 19))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(names.iter().map(|s| s.len()).max().unwrap_or(4) as u32 * 8 + 16)
        .build_cartesian_2d(0f64..xmax, (0..n.saturating_sub(1)).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .y_labels(n)
        .label_style((FONT, 14))
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) if *i < n => names[row(*i)].clone(),
            _ => String::new(),
        })
        .x_labels(5)
        .x_label_formatter(&|v| label(*v))
        .draw()?;
    if let Some(x) = mark {
        chart.draw_series(DashedLineSeries::new(
            [(x, SegmentValue::Exact(0)), (x, SegmentValue::Exact(n))],
            6,
            4,
            GREY.stroke_width(2),
        ))?;
    }
    for (i, o) in outcomes.iter().enumerate() {
        let y = row(i);
        match value(o) {
            Some(v) => {
                let mut bar = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(y)),
                        (v, SegmentValue::Exact(y + 1)),
                    ],
                    color(o).filled(),
                );
                bar.set_margin(5, 5, 0, 0);
                chart.draw_series(std::iter::once(bar))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!(" {}", label(v)),
                    (v, SegmentValue::CenterOf(y)),
                    left_centered(&BLACK),
                )))?;
            }
            None => {
                chart.draw_series(std::iter::once(Text::new(
                    " n/a",
                    (0.0, SegmentValue::CenterOf(y)),
                    left_centered(&GREY),
                )))?;
            }
        }
    }
    Ok(())
}

/// An axis label with as many decimals as the axis's ten or so ticks need
/// to differ: whole numbers on an axis of 10 or more, one decimal up to 1,
/// two up to 0.1 (a short run's virtual time), and so on.
fn tick(v: f64, span: f64) -> String {
    let step = span / 10.0;
    let decimals = if step.is_finite() && step > 0.0 && step < 1.0 {
        ((-step.log10()).ceil() as usize).min(6)
    } else {
        0
    };
    format!("{v:.decimals$}")
}

/// What the bar colours mean.
fn legend_strip<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let mut x = 200;
    for (color, text) in [
        (PLAIN, "consistent hashing"),
        (BOUNDED, "consistent hashing with bounded load"),
        (OTHER, "no key affinity"),
    ] {
        area.draw(&Rectangle::new([(x, 12), (x + 18, 30)], color.filled()))?;
        area.draw(&Text::new(text, (x + 26, 12), (FONT, 17)))?;
        x += 60 + 9 * text.len() as i32;
    }
    Ok(())
}

/// Bar labels: starting at the point, vertically centred on it.
fn left_centered(color: &RGBColor) -> TextStyle<'_> {
    TextStyle::from((FONT, 14).into_font())
        .color(color)
        .pos(Pos::new(HPos::Left, VPos::Center))
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_have_the_decimals_their_axis_needs() {
        assert_eq!(tick(40.0, 70.0), "40");
        assert_eq!(tick(40.0, 10.0), "40");
        assert_eq!(tick(2.5, 5.0), "2.5");
        assert_eq!(tick(0.5, 1.0), "0.5");
        // 2,000 requests last about 0.15 s of virtual time: ticks 0.02 apart.
        assert_eq!(tick(0.02, 0.15), "0.02");
        assert_eq!(tick(0.04, 0.15), "0.04");
        assert_eq!(tick(0.0, 0.0), "0");
        assert_eq!(tick(1e-9, 1e-12), "0.000000");
    }
}
