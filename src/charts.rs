//! Charts for the reports, as SVG text: the score timeline of a session
//! (`score_timeline.svg` beside `report.md`) and the speedup distribution of a batch.
//!
//! Drawn with `plotters`' SVG backend and no font feature: text becomes `<text>` elements
//! that the viewer sets in its own font, and plotters only estimates text widths for the
//! layout, so no font file is read at build or run time. The functions are pure (no file
//! IO) and never panic on odd input: empty lists, no scores, a single point, huge, tiny or
//! non-finite values all give a valid chart.

use anyhow::Result;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One evaluated candidate on the session's timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePoint {
    /// When its evaluation finished, in seconds since the session started.
    pub seconds: f64,
    /// Its speedup over the reference; `None` when it is incorrect or was not timed.
    pub score: Option<f64>,
    /// What it is, e.g. "seed 1"; written beside the points that raised the best.
    pub label: String,
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 500;
const FONT: &str = "sans-serif";
// Font sizes as plotters takes them (it writes 1/1.24 of each into the SVG).
const TITLE_SIZE: u32 = 24;
const AXIS_SIZE: u32 = 16;
const TEXT_SIZE: u32 = 15;
const NOTE_SIZE: u32 = 20;

const CANDIDATE_COLOR: RGBColor = RGBColor(31, 119, 180);
const BEST_COLOR: RGBColor = RGBColor(44, 160, 44);
const REFERENCE_COLOR: RGBColor = RGBColor(127, 127, 127);
const FAILED_COLOR: RGBColor = RGBColor(214, 39, 40);

const POINT_RADIUS: i32 = 4;
const CROSS_SIZE: i32 = 4;
const NO_SCORE_NOTE: &str = "no timed correct candidate";
const NO_SPEEDUP_NOTE: &str = "no task with a correct kernel";

/// Axis ends are kept below this: with a range near `f64::MAX` plotters' tick placement
/// (f64 arithmetic) never returns (seen with plotters 0.3.7). No real speedup or session
/// length comes near it; a value beyond it is drawn at the edge.
const AXIS_LIMIT: f64 = 1e12;

/// A value as an axis or bar label: short for every magnitude.
fn axis_number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e5).contains(&magnitude) {
        format!("{value:.1e}")
    } else {
        let fixed = format!("{value:.2}");
        fixed
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A coordinate plotters can place: finite, not negative (both axes start at 0), at most
/// `AXIS_LIMIT`.
fn plottable(value: f64) -> f64 {
    if value.is_nan() {
        0.0
    } else {
        value.clamp(0.0, AXIS_LIMIT)
    }
}

/// The score a point is drawn with: a finite, non-negative speedup; anything else is a
/// cross on the x axis.
fn drawn_score(point: &TimelinePoint) -> Option<f64> {
    point
        .score
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(plottable)
}

/// The running best over the scored points as the vertices of a step line: flat until a
/// better score arrives, then straight up to it, and flat to `end` (the last evaluation).
fn best_steps(scored: &[(f64, f64)], end: f64) -> Vec<(f64, f64)> {
    let mut by_time = scored.to_vec();
    by_time.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut steps: Vec<(f64, f64)> = Vec::new();
    let mut best: Option<f64> = None;
    for &(seconds, score) in &by_time {
        match best {
            None => steps.push((seconds, score)),
            Some(so_far) if score > so_far => {
                steps.push((seconds, so_far));
                steps.push((seconds, score));
            }
            Some(_) => continue,
        }
        best = Some(score);
    }
    if let (Some(best), Some(&(last, _))) = (best, steps.last())
        && end > last
    {
        steps.push((end, best));
    }
    steps
}

/// The session's score timeline: every timed correct candidate as a point (speedup over
/// seconds since the start), the running best as a step line, the reference (1.0x) as a
/// dashed line, and every candidate without a score (incorrect, or correct but untimed)
/// as a cross on the x axis, so that failures show too.
pub fn score_timeline_svg(points: &[TimelinePoint], title: &str) -> Result<String> {
    // (seconds, score) of the candidates drawn as points; the seconds of the crosses.
    let scored: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((plottable(p.seconds), drawn_score(p)?)))
        .collect();
    let unscored: Vec<f64> = points
        .iter()
        .filter(|p| drawn_score(p).is_none())
        .map(|p| plottable(p.seconds))
        .collect();

    let last_seconds = points
        .iter()
        .map(|p| plottable(p.seconds))
        .fold(0.0, f64::max);
    // Room to the right of the last point and above the highest; the reference line is
    // always in view.
    let x_end = (last_seconds * 1.05).max(1.0);
    let top_score = scored.iter().map(|p| p.1).fold(1.0, f64::max);
    let y_end = top_score * 1.15;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, TITLE_SIZE))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_end, 0.0..y_end)?;
        chart
            .configure_mesh()
            .x_desc("seconds since start")
            .y_desc("speedup over the PyTorch reference (x)")
            .x_label_formatter(&|v| axis_number(*v))
            .y_label_formatter(&|v| axis_number(*v))
            .label_style((FONT, TEXT_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .light_line_style(WHITE.mix(0.0))
            .draw()?;

        // Legend markers are colour swatches, not circles or lines, so that the chart's
        // circles are exactly its candidates and its one green polyline the best line.
        let swatch = |color: RGBColor| {
            move |(x, y): (i32, i32)| Rectangle::new([(x, y - 4), (x + 14, y + 4)], color.filled())
        };
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, 1.0), (x_end, 1.0)],
                8,
                5,
                REFERENCE_COLOR.stroke_width(1),
            ))?
            .label("1.0x: the PyTorch reference")
            .legend(swatch(REFERENCE_COLOR));
        chart
            .draw_series(LineSeries::new(
                best_steps(&scored, last_seconds),
                BEST_COLOR.stroke_width(2),
            ))?
            .label("best so far")
            .legend(swatch(BEST_COLOR));
        chart
            .draw_series(
                scored
                    .iter()
                    .map(|&p| Circle::new(p, POINT_RADIUS, CANDIDATE_COLOR.filled())),
            )?
            .label("correct, timed")
            .legend(swatch(CANDIDATE_COLOR));
        chart
            .draw_series(
                unscored
                    .iter()
                    .map(|&x| Cross::new((x, 0.0), CROSS_SIZE, FAILED_COLOR.stroke_width(2))),
            )?
            .label("incorrect or not timed")
            .legend(swatch(FAILED_COLOR));

        // Name the candidates that raised the best: the story of the run in a few words.
        let mut best: Option<f64> = None;
        let mut raisers: Vec<(f64, f64, &str)> = Vec::new();
        let mut by_time: Vec<&TimelinePoint> = points.iter().collect();
        by_time.sort_by(|a, b| plottable(a.seconds).total_cmp(&plottable(b.seconds)));
        for p in by_time {
            let Some(score) = drawn_score(p) else {
                continue;
            };
            if best.is_none_or(|b| score > b) {
                raisers.push((plottable(p.seconds), score, &p.label));
                best = Some(score);
            }
        }
        // Labels in the right half go to the left of their point, so none runs off the image.
        let label_style = TextStyle::from((FONT, TEXT_SIZE).into_font()).color(&BEST_COLOR);
        chart.draw_series(raisers.into_iter().map(|(x, y, label)| {
            let (style, dx) = if x > x_end / 2.0 {
                (label_style.pos(Pos::new(HPos::Right, VPos::Bottom)), -6)
            } else {
                (label_style.pos(Pos::new(HPos::Left, VPos::Bottom)), 6)
            };
            EmptyElement::at((x, y)) + Text::new(label.to_string(), (dx, -4), style)
        }))?;

        if scored.is_empty() {
            chart.plotting_area().draw(&Text::new(
                NO_SCORE_NOTE,
                (x_end / 2.0, y_end / 2.0),
                TextStyle::from((FONT, NOTE_SIZE).into_font())
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, TEXT_SIZE))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Upper edges of the speedup bins below the last one, roughly doubling: <0.5, 0.5-0.8,
/// 0.8-1, 1-1.5, 1.5-2, 2-4, >=4. A bin holds its lower edge: 1.0 is in 1-1.5.
const SPEEDUP_EDGES: [f64; 6] = [0.5, 0.8, 1.0, 1.5, 2.0, 4.0];
const BIN_LABELS: [&str; 8] = [
    "<0.5x",
    "0.5-0.8x",
    "0.8-1x",
    "1-1.5x",
    "1.5-2x",
    "2-4x",
    ">=4x",
    "no correct kernel",
];
const NO_KERNEL_BIN: usize = BIN_LABELS.len() - 1;

/// How many tasks fall in each bin of `BIN_LABELS`. A speedup that is not a number
/// counts as missing (it was not measured); the counts always add up to the task count.
fn speedup_bins(speedups: &[Option<f64>]) -> [usize; BIN_LABELS.len()] {
    let mut counts = [0; BIN_LABELS.len()];
    for speedup in speedups {
        let bin = match speedup {
            Some(s) if !s.is_nan() => SPEEDUP_EDGES
                .iter()
                .position(|edge| s < edge)
                .unwrap_or(SPEEDUP_EDGES.len()),
            _ => NO_KERNEL_BIN,
        };
        counts[bin] += 1;
    }
    counts
}

/// A batch's speedups as a histogram: one entry per task, `None` when the task got no
/// correct kernel (its own bar, apart from the speedup bins). Every bar carries its count;
/// a dashed line marks 1.0x, where the kernels start to beat the reference.
pub fn speedup_distribution_svg(speedups: &[Option<f64>], title: &str) -> Result<String> {
    let counts = speedup_bins(speedups);
    // Room above the tallest bar for its count.
    let y_end = counts.iter().max().copied().unwrap_or(0) as f64 * 1.15 + 1.0;
    let reference_edge = SPEEDUP_EDGES
        .iter()
        .position(|&edge| edge == 1.0)
        .expect("1.0 is an edge")
        + 1;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, TITLE_SIZE))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(44)
            // Integer ranges are inclusive in plotters: 0..7 is the eight bins.
            .build_cartesian_2d((0..NO_KERNEL_BIN).into_segmented(), 0.0..y_end)?;
        // No y tick labels: each bar says its count, and so every number in the chart is
        // a count.
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(BIN_LABELS.len())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => BIN_LABELS.get(*i).copied().unwrap_or("").into(),
                _ => String::new(),
            })
            .y_labels(0)
            .x_desc("speedup over the PyTorch reference")
            .y_desc("tasks")
            .label_style((FONT, TEXT_SIZE))
            .axis_desc_style((FONT, AXIS_SIZE))
            .draw()?;

        chart.draw_series(counts.iter().enumerate().filter(|(_, n)| **n > 0).map(
            |(bin, &n)| {
                let color = if bin == NO_KERNEL_BIN {
                    FAILED_COLOR
                } else {
                    CANDIDATE_COLOR
                };
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(bin), 0.0),
                        (SegmentValue::Exact(bin + 1), n as f64),
                    ],
                    color.filled(),
                );
                bar.set_margin(0, 0, 6, 6);
                bar
            },
        ))?;
        let count_style = TextStyle::from((FONT, AXIS_SIZE).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series(counts.iter().enumerate().map(|(bin, &n)| {
            EmptyElement::at((SegmentValue::CenterOf(bin), n as f64))
                + Text::new(n.to_string(), (0, -4), count_style.clone())
        }))?;

        let at_reference = |y: f64| (SegmentValue::Exact(reference_edge), y);
        chart.draw_series(DashedLineSeries::new(
            [at_reference(0.0), at_reference(y_end)],
            8,
            5,
            BLACK.stroke_width(1),
        ))?;
        chart.draw_series(std::iter::once(
            EmptyElement::at(at_reference(y_end))
                + Text::new(
                    "1.0x",
                    (4, 2),
                    TextStyle::from((FONT, TEXT_SIZE).into_font()),
                ),
        ))?;
        if counts[..NO_KERNEL_BIN].iter().all(|&n| n == 0) {
            chart.plotting_area().draw(&Text::new(
                NO_SPEEDUP_NOTE,
                (SegmentValue::CenterOf(reference_edge), y_end / 2.0),
                TextStyle::from((FONT, NOTE_SIZE).into_font())
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
        }
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// One element of the SVG: its name, attributes and text content.
    #[derive(Debug)]
    struct Element {
        name: String,
        attrs: BTreeMap<String, String>,
        text: String,
    }

    impl Element {
        fn attr(&self, key: &str) -> &str {
            self.attrs.get(key).map_or("", |v| v.as_str())
        }
        fn number(&self, key: &str) -> f64 {
            self.attr(key).parse().unwrap_or(f64::NAN)
        }
    }

    fn unescape(text: &str) -> String {
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    }

    /// Parses the SVG plotters writes (tags, attributes in double quotes, text between
    /// tags) and fails unless it is one `<svg>` element with every tag closed in order.
    fn parse(svg: &str) -> Vec<Element> {
        let body = svg.trim();
        assert!(body.starts_with("<svg"), "starts with {:?}", &body[..20]);
        assert!(
            body.ends_with("</svg>"),
            "ends with {:?}",
            &body[body.len() - 20..]
        );
        let attr = regex::Regex::new(r#"([\w:-]+)="([^"]*)""#).unwrap();
        let mut elements: Vec<Element> = Vec::new();
        let mut open: Vec<(String, usize)> = Vec::new();
        let mut rest = body;
        let mut closed_root = false;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            if let Some(&(_, index)) = open.last() {
                elements[index].text.push_str(&unescape(text.trim()));
            } else {
                assert!(text.trim().is_empty(), "text outside the root: {text:?}");
            }
            let end = rest[start..].find('>').expect("an unclosed tag") + start;
            let tag = &rest[start + 1..end];
            rest = &rest[end + 1..];
            assert!(!closed_root, "content after </svg>");
            if let Some(name) = tag.strip_prefix('/') {
                let (opened, _) = open.pop().expect("a close without an open");
                assert_eq!(opened, name.trim(), "tags closed out of order");
                closed_root = open.is_empty();
                continue;
            }
            let self_closing = tag.ends_with('/');
            let name: String = tag
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '/')
                .collect();
            assert!(
                !open.is_empty() || elements.is_empty(),
                "a second root <{name}>"
            );
            elements.push(Element {
                name: name.clone(),
                attrs: attr
                    .captures_iter(tag)
                    .map(|c| (c[1].to_string(), unescape(&c[2])))
                    .collect(),
                text: String::new(),
            });
            if !self_closing {
                open.push((name, elements.len() - 1));
            }
        }
        assert!(open.is_empty(), "unclosed: {open:?}");
        assert!(closed_root);
        elements
    }

    fn named<'a>(elements: &'a [Element], name: &str) -> Vec<&'a Element> {
        elements.iter().filter(|e| e.name == name).collect()
    }

    fn texts(elements: &[Element]) -> Vec<&str> {
        named(elements, "text")
            .into_iter()
            .map(|e| e.text.as_str())
            .collect()
    }

    /// The colour as plotters' SVG backend writes it.
    fn hex(color: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", color.0, color.1, color.2)
    }

    fn point(seconds: f64, score: Option<f64>, label: &str) -> TimelinePoint {
        TimelinePoint {
            seconds,
            score,
            label: label.into(),
        }
    }

    fn session_points() -> Vec<TimelinePoint> {
        vec![
            point(30.0, None, "seed 1"),
            point(42.0, Some(0.25), "seed 2"),
            point(95.0, Some(0.9), "repair 1"),
            point(180.0, None, "algorithm"),
            point(240.0, Some(1.37), "repair 1"),
            point(400.0, Some(1.52), "stage 1 grid_and_parallel"),
            point(520.0, Some(1.1), "stage 2 block_tiling"),
        ]
    }

    /// Crosses are two lines each in the failure colour.
    fn crosses(elements: &[Element]) -> usize {
        let lines = named(elements, "line")
            .into_iter()
            .filter(|e| e.attr("stroke") == hex(FAILED_COLOR))
            .count();
        assert_eq!(lines % 2, 0);
        lines / 2
    }

    #[test]
    fn the_timeline_has_a_point_per_timed_candidate_and_a_cross_per_other() {
        let svg = score_timeline_svg(&session_points(), "relu: score timeline").unwrap();
        let elements = parse(&svg);
        let circles = named(&elements, "circle");
        assert_eq!(circles.len(), 5);
        assert!(
            circles
                .iter()
                .all(|c| c.attr("fill") == hex(CANDIDATE_COLOR))
        );
        assert_eq!(crosses(&elements), 2);
        let texts = texts(&elements);
        for text in [
            "relu: score timeline",
            "seconds since start",
            "speedup over the PyTorch reference (x)",
            "best so far",
        ] {
            assert!(texts.contains(&text), "no {text:?} in {texts:?}");
        }
        // The candidates that raised the best are named; the one that did not is not.
        for label in ["seed 2", "repair 1", "stage 1 grid_and_parallel"] {
            assert!(texts.contains(&label), "no {label:?} in {texts:?}");
        }
        assert!(!texts.contains(&"stage 2 block_tiling"));
        assert!(!texts.contains(&NO_SCORE_NOTE));
    }

    #[test]
    fn the_best_line_steps_up_through_the_highest_point() {
        let svg = score_timeline_svg(&session_points(), "t").unwrap();
        let elements = parse(&svg);
        let best_lines: Vec<&Element> = named(&elements, "polyline")
            .into_iter()
            .filter(|e| e.attr("stroke") == hex(BEST_COLOR))
            .collect();
        assert_eq!(best_lines.len(), 1);
        let vertices: Vec<(f64, f64)> = best_lines[0]
            .attr("points")
            .split_whitespace()
            .map(|xy| {
                let (x, y) = xy.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        // The highest circle (smallest y on screen) is a vertex, and nothing of the line
        // is above it.
        let top = named(&elements, "circle")
            .into_iter()
            .min_by(|a, b| a.number("cy").total_cmp(&b.number("cy")))
            .unwrap();
        let top = (top.number("cx"), top.number("cy"));
        assert!(vertices.contains(&top), "{top:?} not in {vertices:?}");
        assert!(vertices.iter().all(|v| v.1 >= top.1));
        // It never goes down: y on screen never grows along it.
        assert!(vertices.windows(2).all(|w| w[1].1 <= w[0].1));
        // Four rises (first point, three better ones) make 1 + 3 * 2 vertices, plus the
        // flat end to the last evaluation.
        assert_eq!(vertices.len(), 8);
    }

    #[test]
    fn best_steps_hold_the_best_until_a_better_one_and_to_the_end() {
        let scored = [(10.0, 1.0), (5.0, 0.5), (20.0, 0.7), (30.0, 2.0)];
        assert_eq!(
            best_steps(&scored, 40.0),
            [
                (5.0, 0.5),
                (10.0, 0.5),
                (10.0, 1.0),
                (30.0, 1.0),
                (30.0, 2.0),
                (40.0, 2.0)
            ]
        );
        assert_eq!(best_steps(&[], 10.0), []);
        assert_eq!(best_steps(&[(3.0, 1.5)], 3.0), [(3.0, 1.5)]);
    }

    #[test]
    fn a_timeline_without_scores_draws_the_axes_and_says_so() {
        let cases: [&[TimelinePoint]; 2] = [
            &[],
            &[point(3.0, None, "seed 1"), point(9.0, None, "seed 2")],
        ];
        for (points, crosses_drawn) in cases.into_iter().zip([0, 2]) {
            let elements = parse(&score_timeline_svg(points, "cpu session").unwrap());
            let texts = texts(&elements);
            assert!(texts.contains(&NO_SCORE_NOTE), "{texts:?}");
            assert!(texts.contains(&"seconds since start"));
            assert!(named(&elements, "circle").is_empty());
            assert_eq!(crosses(&elements), crosses_drawn);
        }
    }

    #[test]
    fn odd_values_still_give_a_chart() {
        let cases: Vec<Vec<TimelinePoint>> = vec![
            vec![point(0.0, Some(1.0), "only")],
            vec![
                point(1e9, Some(1e-9), "tiny"),
                point(2e9, Some(5e8), "huge"),
            ],
            vec![
                point(f64::MAX, Some(f64::MAX), "max"),
                point(-5.0, Some(-1.0), "negative"),
                point(f64::NAN, Some(f64::INFINITY), "not finite"),
                point(f64::INFINITY, Some(f64::NAN), "nan"),
                point(1.0, Some(f64::MIN_POSITIVE), "subnormal-ish"),
            ],
        ];
        for points in cases {
            let title = "odd <values> & \"quotes\"";
            let elements = parse(&score_timeline_svg(&points, title).unwrap());
            assert!(texts(&elements).contains(&title));
            let timed = points
                .iter()
                .filter(|p| p.score.is_some_and(|s| s.is_finite() && s >= 0.0))
                .count();
            assert_eq!(named(&elements, "circle").len(), timed, "{points:?}");
            assert_eq!(crosses(&elements), points.len() - timed);
        }
    }

    #[test]
    fn speedups_fall_in_their_bins_and_the_counts_add_up() {
        let speedups = [
            Some(0.1),
            Some(0.5),
            Some(0.79),
            Some(1.0),
            Some(1.2),
            Some(1.5),
            Some(3.9),
            Some(4.0),
            Some(400.0),
            Some(f64::INFINITY),
            Some(f64::NAN),
            Some(-1.0),
            None,
            None,
        ];
        assert_eq!(speedup_bins(&speedups), [2, 2, 0, 2, 1, 1, 3, 3]);
        assert_eq!(
            speedup_bins(&speedups).iter().sum::<usize>(),
            speedups.len()
        );
    }

    #[test]
    fn the_histogram_labels_every_bar_with_its_count() {
        let speedups = [
            Some(0.3),
            Some(0.9),
            Some(1.1),
            Some(1.2),
            Some(1.4),
            Some(2.5),
            Some(9.0),
            None,
            None,
        ];
        let svg = speedup_distribution_svg(&speedups, "level 1: 9 tasks").unwrap();
        let elements = parse(&svg);
        let texts = texts(&elements);
        // The only numbers in the chart are the bar counts, in bin order.
        let counts: Vec<usize> = texts.iter().filter_map(|t| t.parse().ok()).collect();
        assert_eq!(counts, [1, 0, 1, 3, 0, 1, 1, 2]);
        assert_eq!(counts.iter().sum::<usize>(), speedups.len());
        for label in BIN_LABELS
            .iter()
            .chain(&["1.0x", "tasks", "level 1: 9 tasks"])
        {
            assert!(texts.contains(label), "no {label:?} in {texts:?}");
        }
        // One bar per non-empty bin, the missing kernels in the failure colour.
        let bars: Vec<&Element> = named(&elements, "rect")
            .into_iter()
            .filter(|r| [hex(CANDIDATE_COLOR), hex(FAILED_COLOR)].contains(&r.attr("fill").into()))
            .collect();
        assert_eq!(bars.len(), 6);
        assert_eq!(bars.last().unwrap().attr("fill"), hex(FAILED_COLOR));
        assert!(!texts.contains(&NO_SPEEDUP_NOTE));
        // Taller bars for larger counts: the 3 is the tallest.
        let tallest = bars
            .iter()
            .max_by(|a, b| a.number("height").total_cmp(&b.number("height")))
            .unwrap();
        assert_eq!(
            bars.iter().position(|b| std::ptr::eq(*b, *tallest)),
            Some(2)
        );
    }

    #[test]
    fn an_empty_batch_gives_an_empty_histogram() {
        for speedups in [&[][..], &[None, None][..]] {
            let elements = parse(&speedup_distribution_svg(speedups, "empty").unwrap());
            let counts: Vec<usize> = texts(&elements)
                .iter()
                .filter_map(|t| t.parse().ok())
                .collect();
            assert_eq!(counts.iter().sum::<usize>(), speedups.len());
            assert_eq!(counts.len(), BIN_LABELS.len());
            assert!(texts(&elements).contains(&NO_SPEEDUP_NOTE));
        }
    }

    #[test]
    fn axis_numbers_stay_short() {
        assert_eq!(axis_number(0.0), "0");
        assert_eq!(axis_number(1.0), "1");
        assert_eq!(axis_number(0.25), "0.25");
        assert_eq!(axis_number(1.5), "1.5");
        assert_eq!(axis_number(600.0), "600");
        assert_eq!(axis_number(2e9), "2.0e9");
        assert_eq!(axis_number(1e-9), "1.0e-9");
    }
}
