//! Layered (Sugiyama-style) placement of sibling boxes: ranks, barycenter ordering, coordinates.

/// A point in SVG user units.
pub(super) type Point = (f64, f64);

/// Width and height of a box, in SVG user units.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Size {
    pub width: f64,
    pub height: f64,
}

/// Where a box must go: anywhere (a state, the initial marker), or in a rank of its own above
/// or below all others (the point where a line leaves or enters the container).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Pin {
    #[default]
    Free,
    Top,
    Bottom,
}

/// A box to place.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Node {
    pub size: Size,
    pub pin: Pin,
}

/// An edge between two boxes, with the size of its label if it has one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub from: usize,
    pub to: usize,
    pub label: Option<Size>,
}

/// The boxes one link passes, from its upper end to its lower end.
#[derive(Debug, Clone, Default)]
pub(super) struct Chain {
    pub nodes: Vec<usize>,
    /// The link runs from the lower end to the upper one.
    pub backwards: bool,
    /// Its label's box, one of `nodes`.
    pub label: Option<usize>,
}

/// Where everything went: every box's top-left corner and size (labels and the narrow boxes of
/// passing lines after the given ones), its rank, each rank's top and bottom, each link's
/// chain, and the size of the whole.
pub(super) struct Placement {
    pub corners: Vec<(f64, f64)>,
    pub sizes: Vec<Size>,
    pub ranks: Vec<usize>,
    pub rows: Vec<(f64, f64)>,
    pub chains: Vec<Chain>,
    pub size: Size,
}

/// Horizontal space between boxes of one rank.
const COLUMN_GAP: f64 = 20.0;
/// Vertical space between ranks, where lines turn towards their next box.
const RANK_GAP: f64 = 20.0;
/// The width a line passing through a rank takes there, so lines keep apart from boxes.
const PASSING_WIDTH: f64 = 6.0;
/// Passing boxes allowed per box and label: enough for any drawing a reader can follow.
const PASSING_PER_BOX: usize = 4;
/// Ordering and straightening passes (each one down and one up): enough to settle small
/// graphs, and a fixed number keeps the work linear in the size of the graph.
const PASSES: usize = 4;

/// Boxes in ranks from top to bottom. A label is a box of its own, in a rank between its
/// link's ends (as Graphviz does), so labels neither overlap boxes nor each other, and a line
/// crossing several ranks gets a narrow box in each, so it goes around the boxes there.
/// Deterministic: ties are broken by index (document order).
pub(super) fn place(boxes: &[Node], links: &[Link]) -> Placement {
    let mut nodes: Vec<Size> = boxes.iter().map(|node| node.size).collect();
    let pins: Vec<Pin> = boxes.iter().map(|node| node.pin).collect();
    let mut chains: Vec<Chain> = Vec::with_capacity(links.len());
    let mut edges = Vec::with_capacity(2 * links.len());
    for (index, (upper, lower)) in orient(&pins, links).into_iter().enumerate() {
        let Some((upper, lower)) = upper.zip(lower) else {
            chains.push(Chain::default());
            continue;
        };
        let mut chain = Chain {
            nodes: vec![upper],
            backwards: upper != links[index].from,
            label: None,
        };
        if let Some(size) = links[index].label {
            chain.label = Some(nodes.len());
            chain.nodes.push(nodes.len());
            nodes.push(size);
        }
        chain.nodes.push(lower);
        edges.extend(chain.nodes.windows(2).map(|pair| (pair[0], pair[1])));
        chains.push(chain);
    }
    let mut ranks = pinned_ranks(&pins, nodes.len(), &edges);
    // Long edges become chains of one-rank edges through passing boxes, the shortest first,
    // as far as the budget goes: beyond it a line is drawn straight, which it would rather
    // not be than have the drawing grow with the square of the protocol.
    let span = |chain: &Chain| match (chain.nodes.first(), chain.nodes.last()) {
        (Some(upper), Some(lower)) => ranks[*lower] - ranks[*upper],
        _ => 0,
    };
    let mut by_span: Vec<usize> = (0..chains.len()).collect();
    by_span.sort_by_key(|index| (span(&chains[*index]), *index));
    let mut budget = PASSING_PER_BOX * nodes.len();
    edges.clear();
    for index in by_span {
        let chain = &mut chains[index].nodes;
        let passing: usize = chain
            .windows(2)
            .map(|pair| ranks[pair[1]] - ranks[pair[0]] - 1)
            .sum();
        if passing <= budget {
            budget -= passing;
            let mut long = Vec::with_capacity(chain.len() + passing);
            for pair in chain.windows(2) {
                long.push(pair[0]);
                for rank in ranks[pair[0]] + 1..ranks[pair[1]] {
                    long.push(nodes.len());
                    nodes.push(Size {
                        width: PASSING_WIDTH,
                        height: 0.0,
                    });
                    ranks.push(rank);
                }
            }
            long.extend(chain.last());
            *chain = long;
        }
        edges.extend(chain.windows(2).map(|pair| (pair[0], pair[1])));
    }
    let mut layers = vec![Vec::new(); ranks.iter().max().map_or(0, |top| top + 1)];
    for (index, rank) in ranks.iter().enumerate() {
        layers[*rank].push(index);
    }
    order(&mut layers, &ranks, &edges);
    let (corners, rows, size) = coordinates(&nodes, &layers, &edges);
    Placement {
        corners,
        sizes: nodes,
        ranks,
        rows,
        chains,
        size,
    }
}

/// Each link as `(upper, lower)`: one with a pinned end points away from the pin; the others
/// without cycles among themselves (see `acyclic`).
fn orient(pins: &[Pin], links: &[Link]) -> Vec<(Option<usize>, Option<usize>)> {
    let free: Vec<(usize, Link)> = links
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, link)| pins[link.from] == Pin::Free && pins[link.to] == Pin::Free)
        .collect();
    let free_links: Vec<Link> = free.iter().map(|(_, link)| *link).collect();
    let mut oriented: Vec<(Option<usize>, Option<usize>)> = links
        .iter()
        .map(|link| {
            if pins[link.from] == Pin::Top || pins[link.to] == Pin::Bottom {
                (Some(link.from), Some(link.to))
            } else {
                (Some(link.to), Some(link.from))
            }
        })
        .collect();
    for ((index, _), pair) in free.iter().zip(acyclic(pins.len(), &free_links)) {
        oriented[*index] = pair;
    }
    oriented
}

/// Ranks by longest path over the links between free boxes; boxes pinned to the top get a
/// rank of their own above, those pinned to the bottom one below.
fn pinned_ranks(pins: &[Pin], count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let pin = |node: usize| pins.get(node).copied().unwrap_or_default();
    let free: Vec<(usize, usize)> = edges
        .iter()
        .copied()
        .filter(|(from, to)| pin(*from) == Pin::Free && pin(*to) == Pin::Free)
        .collect();
    let mut ranks = rank(count, &free);
    let shift = usize::from(pins.contains(&Pin::Top));
    for (node, rank) in ranks.iter_mut().enumerate() {
        *rank = if pin(node) == Pin::Top {
            0
        } else {
            *rank + shift
        };
    }
    let deepest = (0..count)
        .filter(|node| pin(*node) != Pin::Bottom)
        .map(|node| ranks[node])
        .max()
        .unwrap_or(0);
    for (node, rank) in ranks.iter_mut().enumerate() {
        if pin(node) == Pin::Bottom {
            *rank = deepest + 1;
        }
    }
    ranks
}

/// Whether each link between free boxes runs up once `place` breaks cycles.
pub(super) fn upward(count: usize, links: &[Link]) -> Vec<bool> {
    acyclic(count, links)
        .into_iter()
        .zip(links)
        .map(|((upper, _), link)| upper.is_some_and(|upper| upper != link.from))
        .collect()
}

/// Each link as `(upper, lower)` in a graph without cycles: a DFS in index order turns around
/// the links that close a cycle. Self-links give `(None, None)`.
fn acyclic(count: usize, links: &[Link]) -> Vec<(Option<usize>, Option<usize>)> {
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (index, link) in links.iter().enumerate() {
        if link.from != link.to {
            outgoing[link.from].push(index);
        }
    }
    // 0: not seen, 1: on the DFS stack, 2: done.
    let mut mark = vec![0u8; count];
    let mut reversed = vec![false; links.len()];
    for start in 0..count {
        if mark[start] != 0 {
            continue;
        }
        // Iterative DFS: (node, next outgoing link to look at).
        let mut stack = vec![(start, 0usize)];
        mark[start] = 1;
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            if let Some(&link) = outgoing[node].get(*next) {
                *next += 1;
                let target = links[link].to;
                match mark[target] {
                    0 => {
                        mark[target] = 1;
                        stack.push((target, 0));
                    }
                    1 => reversed[link] = true,
                    _ => {}
                }
            } else {
                mark[node] = 2;
                stack.pop();
            }
        }
    }
    links
        .iter()
        .zip(reversed)
        .map(|(link, reversed)| {
            if link.from == link.to {
                (None, None)
            } else if reversed {
                (Some(link.to), Some(link.from))
            } else {
                (Some(link.from), Some(link.to))
            }
        })
        .collect()
}

/// Longest path from the sources (Kahn's order): every edge points down at least one rank.
fn rank(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut incoming = vec![0usize; count];
    for (from, to) in edges {
        outgoing[*from].push(*to);
        incoming[*to] += 1;
    }
    let mut ranks = vec![0usize; count];
    let mut ready: std::collections::VecDeque<usize> =
        (0..count).filter(|node| incoming[*node] == 0).collect();
    while let Some(node) = ready.pop_front() {
        for &target in &outgoing[node] {
            ranks[target] = ranks[target].max(ranks[node] + 1);
            incoming[target] -= 1;
            if incoming[target] == 0 {
                ready.push_back(target);
            }
        }
    }
    ranks
}

/// Barycenter ordering: each box moves towards the average place of its neighbours in the
/// ranks above (going down) or below (going up), which removes most crossings.
fn order(layers: &mut [Vec<usize>], ranks: &[usize], edges: &[(usize, usize)]) {
    let count = ranks.len();
    let (above, below) = neighbours(count, edges);
    // A box's place in its rank, from 0 to 1, so ranks of different widths compare.
    let mut place = vec![0.0f64; count];
    for layer in layers.iter() {
        for (position, node) in layer.iter().enumerate() {
            place[*node] = (position as f64 + 0.5) / layer.len() as f64;
        }
    }
    for (downwards, index) in sweeps(layers.len()) {
        let neighbours = if downwards { &above } else { &below };
        let mut keyed: Vec<(f64, usize)> = layers[index]
            .iter()
            .map(|node| {
                let around = &neighbours[*node];
                if around.is_empty() {
                    return (place[*node], *node);
                }
                let sum: f64 = around.iter().map(|other| place[*other]).sum();
                (sum / around.len() as f64, *node)
            })
            .collect();
        keyed.sort_by(|left, right| left.0.total_cmp(&right.0).then(left.1.cmp(&right.1)));
        layers[index] = keyed.into_iter().map(|(_, node)| node).collect();
        for (position, node) in layers[index].iter().enumerate() {
            place[*node] = (position as f64 + 0.5) / layers[index].len() as f64;
        }
    }
}

/// Each node's neighbours in the ranks above and below it.
fn neighbours(count: usize, edges: &[(usize, usize)]) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut above: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut below: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (from, to) in edges {
        above[*to].push(*from);
        below[*from].push(*to);
    }
    (above, below)
}

/// The ranks a pass visits, `PASSES` times: down from the second (each looking at the rank
/// above), then up from the one before last (looking below); `true` going down.
fn sweeps(ranks: usize) -> impl Iterator<Item = (bool, usize)> {
    let down = (1..ranks).map(|index| (true, index));
    let up = (0..ranks.saturating_sub(1))
        .rev()
        .map(|index| (false, index));
    let pass: Vec<(bool, usize)> = down.chain(up).collect();
    std::iter::repeat_n(pass, PASSES).flatten()
}

/// Rows from top to bottom; within a row, boxes keep their order and gaps while each moves
/// towards the middle of its neighbours in the rows above and below (averaging a placement
/// packed from the left with one packed from the right, both of which keep the gaps).
fn coordinates(
    boxes: &[Size],
    layers: &[Vec<usize>],
    edges: &[(usize, usize)],
) -> (Vec<Point>, Vec<(f64, f64)>, Size) {
    let (above, below) = neighbours(boxes.len(), edges);
    // Left edges, first packed from 0.
    let mut left = vec![0.0f64; boxes.len()];
    for layer in layers {
        let mut next = 0.0;
        for node in layer {
            left[*node] = next;
            next += boxes[*node].width + COLUMN_GAP;
        }
    }
    for (downwards, index) in sweeps(layers.len()) {
        let neighbours = if downwards { &above } else { &below };
        straighten(&layers[index], boxes, neighbours, &mut left);
    }
    let lowest = left.iter().copied().fold(f64::INFINITY, f64::min);
    let mut corners = vec![(0.0, 0.0); boxes.len()];
    let mut rows = Vec::with_capacity(layers.len());
    let mut width: f64 = 0.0;
    let mut top = 0.0;
    for (index, layer) in layers.iter().enumerate() {
        let height = layer
            .iter()
            .map(|node| boxes[*node].height)
            .fold(0.0, f64::max);
        for node in layer {
            // Boxes of a row are centred on the row's middle line.
            let x = left[*node] - lowest;
            corners[*node] = (x, top + (height - boxes[*node].height) / 2.0);
            width = width.max(x + boxes[*node].width);
        }
        rows.push((top, top + height));
        top += height;
        if index + 1 < layers.len() {
            top += RANK_GAP;
        }
    }
    (corners, rows, Size { width, height: top })
}

/// Moves one row's boxes towards the middle of their neighbours, keeping order and gaps.
fn straighten(layer: &[usize], boxes: &[Size], neighbours: &[Vec<usize>], left: &mut [f64]) {
    let wanted: Vec<f64> = layer
        .iter()
        .map(|node| {
            let around = &neighbours[*node];
            if around.is_empty() {
                return left[*node];
            }
            let middle = around
                .iter()
                .map(|other| left[*other] + boxes[*other].width / 2.0)
                .sum::<f64>()
                / around.len() as f64;
            middle - boxes[*node].width / 2.0
        })
        .collect();
    let mut from_left = wanted.clone();
    for position in 1..layer.len() {
        let previous = layer[position - 1];
        let least = from_left[position - 1] + boxes[previous].width + COLUMN_GAP;
        from_left[position] = from_left[position].max(least);
    }
    let mut from_right = wanted;
    for position in (0..layer.len().saturating_sub(1)).rev() {
        let most = from_right[position + 1] - boxes[layer[position]].width - COLUMN_GAP;
        from_right[position] = from_right[position].min(most);
    }
    for (position, node) in layer.iter().enumerate() {
        left[*node] = (from_left[position] + from_right[position]) / 2.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square() -> Node {
        Node {
            size: Size {
                width: 10.0,
                height: 10.0,
            },
            pin: Pin::Free,
        }
    }

    fn link(from: usize, to: usize) -> Link {
        Link {
            from,
            to,
            label: Some(square().size),
        }
    }

    #[test]
    fn a_cycle_is_ranked_in_index_order() {
        let placement = place(&[square(); 3], &[link(0, 1), link(1, 2), link(2, 0)]);
        let corners = &placement.corners;
        assert!(corners[0].1 < corners[1].1 && corners[1].1 < corners[2].1);
        // The label of the link that closes the cycle sits between its ends too.
        let chain = &placement.chains[2];
        assert!(chain.backwards);
        let label = corners[chain.label.expect("label")];
        assert!(corners[0].1 < label.1 && label.1 < corners[2].1);
    }

    #[test]
    fn barycenters_uncross_a_pair() {
        // 0 → 3 and 1 → 2: the second rank swaps so the edges do not cross.
        let corners = place(&[square(); 4], &[link(0, 3), link(1, 2)]).corners;
        assert!(corners[3].0 < corners[2].0);
    }

    #[test]
    fn a_long_link_passes_each_rank_between_its_ends() {
        // 0 → 1 → 2 and 0 → 2: the long link's chain has a box in every rank it crosses
        // (its label's rank, box 1's, the next label rank), from its upper end down.
        let placement = place(&[square(); 3], &[link(0, 1), link(1, 2), link(0, 2)]);
        let chain = &placement.chains[2].nodes;
        assert_eq!(chain.len(), 5, "{chain:?}");
        let ranks: Vec<usize> = chain.iter().map(|node| placement.ranks[*node]).collect();
        assert_eq!(ranks, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn pinned_boxes_take_the_top_and_bottom_ranks() {
        // 0 → 1, with a port above 1 and one below 0.
        let mut nodes = vec![square(); 4];
        nodes[2].pin = Pin::Top;
        nodes[3].pin = Pin::Bottom;
        let unlabelled = |from, to| Link {
            from,
            to,
            label: None,
        };
        let links = [link(0, 1), unlabelled(2, 1), unlabelled(0, 3)];
        let placement = place(&nodes, &links);
        let ranks = &placement.ranks;
        assert_eq!(ranks[2], 0);
        assert!(ranks[0] > ranks[2] && ranks[1] > ranks[0]);
        assert_eq!(ranks[3], ranks.iter().max().copied().unwrap_or_default());
        // The link from the box to the port below is not turned around.
        assert!(!placement.chains[2].backwards);
    }
}
