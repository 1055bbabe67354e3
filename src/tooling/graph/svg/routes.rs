//! The lines of one container's links: straight down through each rank, turning only between.

use super::layers::{Chain, Placement};

/// A label stands this far right of the line passing its box's left edge.
pub(super) const LABEL_GAP: f64 = 6.0;

/// Where a link's end meets its box, relative to the box's corner: at a fixed `x` (where the
/// line leaves a container it comes out of), or anywhere from `left` to `right` (spread among
/// the box's other lines, in the order of where they go); `top` and `bottom` are the box's
/// edges there.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Attachment {
    pub fixed: Option<f64>,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

impl Attachment {
    /// The same, for a box that far below its node's corner.
    pub fn lowered(self, by: f64) -> Attachment {
        Attachment {
            top: self.top + by,
            bottom: self.bottom + by,
            ..self
        }
    }
}

/// An end waiting for its place on its box's edge: the `x` its line goes to next, its link, and
/// whether it is the link's upper end.
struct Waiting {
    toward: f64,
    link: usize,
    upper: bool,
}

/// Each link's line, from its `from` end to its `to` end, given where each end attaches
/// (`ends[link]`: the `from` end's, then the `to` end's). In a rank a line runs straight down
/// (beside its label, through a passing box, out of or into its end's box), so it stays in
/// its own column there; it turns only in the gaps between ranks, where there are no boxes.
pub(super) fn routes(
    placement: &Placement,
    ends: &[(Attachment, Attachment)],
) -> Vec<Vec<(f64, f64)>> {
    let mut labels = vec![false; placement.sizes.len()];
    for label in placement.chains.iter().filter_map(|chain| chain.label) {
        labels[label] = true;
    }
    // A line passes a label on its left, any other box in its middle.
    let line_x = |node: usize| {
        let (x, _) = placement.corners[node];
        if labels[node] {
            x
        } else {
            x + placement.sizes[node].width / 2.0
        }
    };
    // Every end that may move along its box's edge, by (box, lower edge).
    let mut spread: std::collections::BTreeMap<(usize, bool), Vec<Waiting>> = Default::default();
    let mut xs: Vec<[f64; 2]> = vec![[0.0; 2]; placement.chains.len()];
    for (index, chain) in placement.chains.iter().enumerate() {
        let (Some(&upper), Some(&lower)) = (chain.nodes.first(), chain.nodes.last()) else {
            continue;
        };
        let (from, to) = ends[index];
        let (upper_end, lower_end) = if chain.backwards {
            (to, from)
        } else {
            (from, to)
        };
        let next_below = chain.nodes.get(1).map_or(upper, |node| *node);
        let next_above = chain.nodes[chain.nodes.len().saturating_sub(2)];
        for (position, (node, attachment, toward)) in [
            (upper, upper_end, next_below),
            (lower, lower_end, next_above),
        ]
        .into_iter()
        .enumerate()
        {
            let corner = placement.corners[node].0;
            match attachment.fixed {
                Some(x) => xs[index][position] = corner + x,
                None => spread
                    .entry((node, position == 0))
                    .or_default()
                    .push(Waiting {
                        toward: line_x(toward),
                        link: index,
                        upper: position == 0,
                    }),
            }
        }
    }
    for ((node, _), mut waiting) in spread {
        waiting.sort_by(|a, b| a.toward.total_cmp(&b.toward).then(a.link.cmp(&b.link)));
        let corner = placement.corners[node].0;
        let count = waiting.len();
        for (
            rank,
            Waiting {
                toward,
                link: index,
                upper,
            },
        ) in waiting.into_iter().enumerate()
        {
            let chain = &placement.chains[index];
            let (from, to) = ends[index];
            let attachment = if upper != chain.backwards { from } else { to };
            let (left, right) = (corner + attachment.left, corner + attachment.right);
            let x = if count == 1 {
                toward.clamp(left, right)
            } else {
                left + (right - left) * (rank as f64 + 1.0) / (count as f64 + 1.0)
            };
            xs[index][usize::from(!upper)] = x;
        }
    }
    placement
        .chains
        .iter()
        .enumerate()
        .map(|(index, chain)| polyline(placement, chain, ends[index], xs[index], &line_x))
        .collect()
}

/// One chain's points, from the link's `from` end.
fn polyline(
    placement: &Placement,
    chain: &Chain,
    (from, to): (Attachment, Attachment),
    [upper_x, lower_x]: [f64; 2],
    line_x: &impl Fn(usize) -> f64,
) -> Vec<(f64, f64)> {
    let (Some(&upper), Some(&lower)) = (chain.nodes.first(), chain.nodes.last()) else {
        return Vec::new();
    };
    let (upper_end, lower_end) = if chain.backwards {
        (to, from)
    } else {
        (from, to)
    };
    let row = |node: usize| placement.rows[placement.ranks[node]];
    let mut points = vec![
        (upper_x, placement.corners[upper].1 + upper_end.bottom),
        (upper_x, row(upper).1),
    ];
    for node in &chain.nodes[1..chain.nodes.len() - 1] {
        let x = line_x(*node);
        let (top, bottom) = row(*node);
        points.push((x, top));
        points.push((x, bottom));
    }
    points.push((lower_x, row(lower).0));
    points.push((lower_x, placement.corners[lower].1 + lower_end.top));
    points.dedup();
    if chain.backwards {
        points.reverse();
    }
    points
}
