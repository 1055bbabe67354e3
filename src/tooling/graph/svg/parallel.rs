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
    let mut width = (left - REGION_GAP + PADDING).max(header.width + 2.0 * PADDING);
    let mut bottom = top + regions_height + PADDING / 2.0;
    let mut below = Vec::new();
    for line in lines.iter().filter(own).filter(|line| !inward(line)) {
        let height = label_height(plans, *line) + 2.0 * BAND_GAP;
        below.push(Band {
            line: *line,
            top: bottom,
        });
        bottom += height;
    }
    let height = bottom + PADDING / 2.0;
    // Where each line meets the region it passes or ends in.
    let region_x = |work: &Work, line: usize, end: StateId| {
        let region = child_towards(machine, container, end)?;
        let (x, y) = work.offsets[region.index()];
        let meet = attachment(machine, work, line, region, end);
        let middle = meet.fixed.unwrap_or((meet.left + meet.right) / 2.0);
        Some((x + middle, y, y + work.sizes[region.index()].height))
    };
    for line in lines {
        let plan = &plans.lines[*line];
        let leaving = plan.exits.contains(&container);
        if !leaving && !plan.entries.contains(&container) {
            continue;
        }
        let (end, side) = if leaving {
            (plan.source, plan.exit_side)
        } else {
            (plan.target, plan.entry_side)
        };
        let Some((x, region_top, region_bottom)) = region_x(work, *line, end) else {
            continue;
        };
        let mut points = match side {
            Side::Top => vec![(x, region_top), (x, 0.0)],
            Side::Bottom => vec![(x, region_bottom), (x, height)],
        };
        if !leaving {
            points.reverse();
        }
        work.ports.insert((*line, container), x);
        work.pieces.insert((*line, container), points);
    }
    // Lines crossing every band: those passing through, above or below the regions.
    let passing = |side: Side| -> Vec<f64> {
        lines
            .iter()
            .filter(|line| !own(line))
            .filter_map(|line| {
                let plan = &plans.lines[*line];
                let leaving = plan.exits.contains(&container);
                let crossing = if leaving {
                    plan.exit_side
                } else {
                    plan.entry_side
                };
                (crossing == side).then(|| work.ports.get(&(*line, container)).copied())?
            })
            .collect()
    };
    let mut verticals_above = passing(Side::Top);
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
        let mut points = vec![(x, start), (x, region_top)];
        if plan.source != container {
            points.reverse();
        }
        let size = label_size(plans, band.line);
        // Beside the line, on the side no line passing this band runs through.
        let candidates = [x + LABEL_GAP, x - LABEL_GAP - size.width];
        let label_x = free_place(&candidates, size.width, &verticals_above);
        width = width.max(label_x + size.width + PADDING);
        work.labels[band.line] = Some((container, label_x.max(PADDING / 2.0), start));
        work.pieces.insert((band.line, container), points);
        verticals_above.push(x);
    }
    // Lines below: each line's ends run down to its band, so a band is crossed only by the
    // lines of the bands under it.
    let mut ends = Vec::new();
    for band in &below {
        let plan = &plans.lines[band.line];
        let from = region_x(work, band.line, plan.source);
        let to = region_x(work, band.line, plan.target);
        ends.push(from.zip(to));
    }
    let mut verticals_below = passing(Side::Bottom);
    for (band, ends) in below.iter().zip(&ends).rev() {
        let Some(((from_x, _, from_bottom), (to_x, _, to_bottom))) = *ends else {
            continue;
        };
        let y = band.top + BAND_GAP;
        let points = vec![
            (from_x, from_bottom),
            (from_x, y),
            (to_x, y),
            (to_x, to_bottom),
        ];
        let size = label_size(plans, band.line);
        let (low, high) = (from_x.min(to_x), from_x.max(to_x));
        let candidates = [
            low + LABEL_GAP,
            (low + high - size.width) / 2.0,
            high - size.width - LABEL_GAP,
            high + LABEL_GAP,
            low - LABEL_GAP - size.width,
        ];
        let label_x = free_place(&candidates, size.width, &verticals_below);
        width = width.max(label_x + size.width + PADDING);
        work.labels[band.line] = Some((container, label_x.max(PADDING / 2.0), y + 2.0));
        work.pieces.insert((band.line, container), points);
        verticals_below.extend([from_x, to_x]);
    }
    Size { width, height }
}

/// The first place for a label of `width` that no vertical line runs through, else the first.
fn free_place(candidates: &[f64], width: f64, verticals: &[f64]) -> f64 {
    let clear = |left: f64| {
        verticals
            .iter()
            .all(|x| *x < left - 2.0 || *x > left + width + 2.0)
    };
    candidates
        .iter()
        .copied()
        .find(|left| *left >= PADDING / 2.0 && clear(*left))
        .unwrap_or(candidates[0])
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
