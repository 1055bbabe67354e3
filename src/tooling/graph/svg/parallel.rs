//! A parallel state: its regions side by side, and bands above and below them for its lines.

use super::layers::Size;
use super::layout::{PADDING, Scene, Work, attachment, block_size, footprint, lift};
use super::plan::{Plans, Shape, Side, child_towards};
use super::routes::LABEL_GAP;
use crate::pipeline::compile::machine::StateId;

/// Space between parallel regions (the dashed separator runs in its middle).
const REGION_GAP: f64 = 2.0 * PADDING;
/// Space above and below a line in its band.
const BAND_GAP: f64 = 6.0;
/// Space kept between a label and a line passing it.
const CLEARANCE: f64 = 2.0;
/// Up to this many lines between regions, the band order is searched for labels that fit;
/// beyond, they go narrowest first (the search grows with the square of the count).
const SEARCHED_BANDS: usize = 64;

/// Where a line meets a region: its `x`, and the region's top and bottom.
type Meeting = (f64, f64, f64);

/// A label's left edge: beside its line's span (`Ok`), or in a gap the line detours to.
type Placed = Result<f64, f64>;

/// One line drawn in a band: to or from the state itself above the regions (one band each),
/// or between two regions below them.
struct Band {
    line: usize,
    top: f64,
}

/// Lays out a parallel state's regions and the lines drawn in it; returns its size.
pub(super) fn arrange(scene: &Scene, container: StateId, work: &mut Work) -> Size {
    let (machine, plans, content) = (scene.machine, scene.plans, scene.content);
    let index = container.index();
    let state = machine.state(container);
    let header = block_size(&content.lines[index]);
    let lines = &plans.by_container[index];
    let own = |line: &&usize| plans.lines[**line].common == container;
    let inward = |line: &&usize| !matches!(plans.lines[**line].shape, Shape::Siblings { .. });
    // Lines to or from the state itself above the regions, lines between regions below.
    let mut top = header.height + PADDING;
    let mut above = Vec::new();
    for line in lines.iter().filter(own).filter(inward) {
        let height = label_height(plans, *line) + 2.0 * BAND_GAP;
        above.push(Band { line: *line, top });
        top += height;
    }
    let mut left = PADDING;
    let mut regions_height: f64 = 0.0;
    for child in &state.children {
        work.offsets[child.index()] = (left, top + lift(&work.sizes, content, *child));
        let footprint = footprint(&work.sizes, content, *child);
        left += footprint.width + REGION_GAP;
        regions_height = regions_height.max(footprint.height);
    }
    // Where each line meets the region it passes or ends in.
    let region_x = |work: &Work, line: usize, end: StateId| -> Option<Meeting> {
        let region = child_towards(machine, container, end)?;
        let (x, y) = work.offsets[region.index()];
        let meet = attachment(machine, work, line, region, end);
        let middle = meet.fixed.unwrap_or((meet.left + meet.right) / 2.0);
        Some((x + middle, y, y + work.sizes[region.index()].height))
    };
    // The lines passing through: where each crosses, its side, and whether it leaves.
    let passing: Vec<(usize, Meeting, Side, bool)> = lines
        .iter()
        .filter(|line| !own(line))
        .filter_map(|line| {
            let plan = &plans.lines[*line];
            let leaving = plan.exits.contains(&container);
            let (end, side) = if leaving {
                (plan.source, plan.exit_side)
            } else {
                (plan.target, plan.entry_side)
            };
            Some((*line, region_x(work, *line, end)?, side, leaving))
        })
        .collect();
    // Each runs through every band on its side.
    let through = |wanted: Side| -> Vec<f64> {
        let on_side = passing.iter().filter(|(_, _, side, _)| *side == wanted);
        on_side.map(|(_, meeting, _, _)| meeting.0).collect()
    };
    let mut width = (left - REGION_GAP + PADDING).max(header.width + 2.0 * PADDING);
    let mut bottom = top + regions_height + PADDING / 2.0;
    let mut across: Vec<(usize, Meeting, Meeting)> = lines
        .iter()
        .filter(own)
        .filter(|line| !inward(line))
        .filter_map(|line| {
            let plan = &plans.lines[*line];
            let from = region_x(work, *line, plan.source)?;
            let to = region_x(work, *line, plan.target)?;
            Some((*line, from, to))
        })
        .collect();
    across.sort_by(|a, b| {
        let span = |(_, from, to): &(usize, Meeting, Meeting)| (from.0 - to.0).abs();
        span(a).total_cmp(&span(b)).then(a.0.cmp(&b.0))
    });
    // Bands are filled from the bottom up: a band is crossed only by the lines of the bands
    // under it, so each pick is the narrowest line whose label fits beside it among those.
    let mut verticals = through(Side::Bottom);
    let mut stacked: Vec<(usize, Meeting, Meeting, Placed)> = Vec::with_capacity(across.len());
    while !across.is_empty() {
        let near = |(line, from, to): &(usize, Meeting, Meeting), verticals: &[f64]| {
            let size = label_size(plans, *line);
            free_place(
                &beside_span(from.0, to.0, size.width),
                size.width,
                verticals,
            )
        };
        let pick = if across.len() <= SEARCHED_BANDS {
            let fitting = across
                .iter()
                .position(|line| near(line, &verticals).is_some());
            fitting.unwrap_or(0)
        } else {
            0
        };
        let (line, from, to) = across.remove(pick);
        let size = label_size(plans, line);
        let placed = near(&(line, from, to), &verticals)
            .map(Ok)
            .unwrap_or_else(|| {
                // No room beside its span: the label goes where there is, and the line runs
                // along it (so its own ends must not cross it either).
                let wanted = beside_span(from.0, to.0, size.width)[0];
                let mut blocked = verticals.clone();
                blocked.extend([from.0, to.0]);
                Err(nearest_gap(wanted, size.width, &blocked))
            });
        verticals.extend([from.0, to.0]);
        stacked.push((line, from, to, placed));
    }
    for (line, from, to, placed) in stacked.into_iter().rev() {
        let y = bottom + BAND_GAP;
        let size = label_size(plans, line);
        let (label_x, points) = match placed {
            Ok(label_x) => (
                label_x,
                vec![(from.0, from.2), (from.0, y), (to.0, y), (to.0, to.2)],
            ),
            Err(label_x) => {
                let (line_x, under) = (label_x - LABEL_GAP, y + size.height + 4.0);
                let points = vec![
                    (from.0, from.2),
                    (from.0, y),
                    (line_x, y),
                    (line_x, under),
                    (to.0, under),
                    (to.0, to.2),
                ];
                (label_x, points)
            }
        };
        width = width.max(label_x + size.width + PADDING);
        work.labels[line] = Some((container, label_x, y + 2.0));
        work.pieces.insert((line, container), points);
        bottom += size.height + 2.0 * BAND_GAP;
    }
    let height = bottom + PADDING / 2.0;
    for (line, (x, region_top, region_bottom), side, leaving) in &passing {
        let mut points = match side {
            Side::Top => vec![(*x, *region_top), (*x, 0.0)],
            Side::Bottom => vec![(*x, *region_bottom), (*x, height)],
        };
        if !leaving {
            points.reverse();
        }
        work.ports.insert((*line, container), *x);
        work.pieces.insert((*line, container), points);
    }
    let mut verticals = through(Side::Top);
    for band in &above {
        let plan = &plans.lines[band.line];
        let end = match plan.shape {
            Shape::Inward { .. } => plan.target,
            _ => plan.source,
        };
        let Some((x, region_top, _)) = region_x(work, band.line, end) else {
            continue;
        };
        let start = band.top + BAND_GAP;
        let size = label_size(plans, band.line);
        // Its own line runs down beside its label, and on below its band from `x`, as do
        // the lines of the bands above.
        let candidates = [x + LABEL_GAP, x - LABEL_GAP - size.width];
        let (label_x, mut points) = match free_place(&candidates, size.width, &verticals) {
            Some(label_x) => (label_x, vec![(x, start), (x, region_top)]),
            None => {
                // No room beside `x`: the line starts beside the label where there is room,
                // and turns to `x` under it.
                let label_x = nearest_gap(candidates[0], size.width, &verticals);
                let (line_x, turn) = (label_x - LABEL_GAP, start + size.height + BAND_GAP / 2.0);
                let points = vec![(line_x, start), (line_x, turn), (x, turn), (x, region_top)];
                (label_x, points)
            }
        };
        if plan.source != container {
            points.reverse();
        }
        verticals.push(x);
        width = width.max(label_x + size.width + PADDING);
        work.labels[band.line] = Some((container, label_x, start));
        work.pieces.insert((band.line, container), points);
    }
    Size { width, height }
}

/// Places for a label under a line running between `from` and `to`: within its span, then
/// just past either end.
fn beside_span(from: f64, to: f64, width: f64) -> [f64; 5] {
    let (low, high) = (from.min(to), from.max(to));
    [
        low + LABEL_GAP,
        (low + high - width) / 2.0,
        high - width - LABEL_GAP,
        high + LABEL_GAP,
        low - LABEL_GAP - width,
    ]
}

/// The first of `candidates` for a label of `width` that no vertical line runs through.
fn free_place(candidates: &[f64], width: f64, verticals: &[f64]) -> Option<f64> {
    candidates
        .iter()
        .copied()
        .find(|left| *left >= PADDING / 2.0 && clear(*left, width, verticals))
}

/// The place nearest `wanted` in a gap between vertical lines where a label of `width` fits.
fn nearest_gap(wanted: f64, width: f64, verticals: &[f64]) -> f64 {
    // Right of each line, and at the left border.
    let starts =
        std::iter::once(PADDING / 2.0).chain(verticals.iter().map(|x| x + CLEARANCE + 0.5));
    starts
        .filter(|left| clear(*left, width, verticals))
        .min_by(|a, b| (a - wanted).abs().total_cmp(&(b - wanted).abs()))
        .unwrap_or(wanted)
}

fn clear(left: f64, width: f64, verticals: &[f64]) -> bool {
    verticals
        .iter()
        .all(|x| *x < left - CLEARANCE || *x > left + width + CLEARANCE)
}

/// A line's label text, without the gap a layered label keeps from its line.
fn label_size(plans: &Plans, line: usize) -> Size {
    let size = plans.lines[line].label.unwrap_or_default();
    Size {
        width: (size.width - LABEL_GAP).max(0.0),
        height: size.height,
    }
}

fn label_height(plans: &Plans, line: usize) -> f64 {
    label_size(plans, line).height
}
