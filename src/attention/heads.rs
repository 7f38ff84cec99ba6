//! A set of heads: which of a model's heads take part in its output. The one type for it in
//! every layer of the app: the core and the oracle, the CPU and GPU kernels, the trained model,
//! the page's state and its links.

/// Which of a model's heads are active. Heads are numbered `0..len()`; in a model of several
/// layers, head `h` of layer `l` is `l * heads_per_layer + h`. `true` is active, `false` pruned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HeadSet(Vec<bool>);

impl HeadSet {
    /// Every one of `len` heads active.
    pub fn all(len: usize) -> Self {
        HeadSet(vec![true; len])
    }

    /// `len` heads with those listed in `pruned` switched off. Indices out of range are
    /// ignored, so a set chosen for a larger model stays usable.
    pub fn with_pruned(len: usize, pruned: impl IntoIterator<Item = usize>) -> Self {
        let mut set = HeadSet::all(len);
        for h in pruned {
            if h < len {
                set.0[h] = false;
            }
        }
        set
    }

    /// Number of heads, active or not.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no heads at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether head `h` is active (`h < len()`).
    pub fn is_active(&self, h: usize) -> bool {
        self.0[h]
    }

    /// Whether head `h` is pruned (`h < len()`).
    pub fn is_pruned(&self, h: usize) -> bool {
        !self.0[h]
    }

    /// Number of active heads.
    pub fn active_count(&self) -> usize {
        self.0.iter().filter(|&&a| a).count()
    }

    /// Number of pruned heads.
    pub fn pruned_count(&self) -> usize {
        self.len() - self.active_count()
    }

    /// Whether any head is pruned.
    pub fn any_pruned(&self) -> bool {
        self.0.contains(&false)
    }

    /// The pruned heads, in increasing order.
    pub fn pruned(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().filter(|(_, &a)| !a).map(|(h, _)| h)
    }

    /// The active heads, in increasing order.
    pub fn active(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().filter(|(_, &a)| a).map(|(h, _)| h)
    }

    /// Switches head `h` on or off.
    pub fn set(&mut self, h: usize, active: bool) {
        self.0[h] = active;
    }

    /// Flips head `h`.
    pub fn toggle(&mut self, h: usize) {
        self.0[h] = !self.0[h];
    }

    /// Switches every head back on.
    pub fn restore_all(&mut self) {
        self.0.fill(true);
    }

    /// The same heads for a model of `len` heads: the first `len` keep their state, heads beyond
    /// this set's length are active.
    pub fn resized(&self, len: usize) -> HeadSet {
        let mut set = HeadSet::all(len);
        let kept = len.min(self.len());
        set.0[..kept].copy_from_slice(&self.0[..kept]);
        set
    }

    /// For a model of layers of `per_layer` heads: the first layer whose heads differ between
    /// `self` and `other` (both the same length), or `None` when they are equal.
    pub fn first_differing_layer(&self, other: &HeadSet, per_layer: usize) -> Option<usize> {
        assert_eq!(self.len(), other.len(), "sets of different models");
        assert!(per_layer > 0, "layers have heads");
        self.0.iter().zip(&other.0).position(|(a, b)| a != b).map(|h| h / per_layer)
    }

    /// Pruned heads of layer `layer` (of `per_layer` heads each), as indices within the layer.
    pub fn pruned_in_layer(&self, layer: usize, per_layer: usize) -> impl Iterator<Item = usize> + '_ {
        self.0[layer * per_layer..(layer + 1) * per_layer]
            .iter()
            .enumerate()
            .filter(|(_, &a)| !a)
            .map(|(h, _)| h)
    }
}

#[cfg(test)]
mod tests {
    use super::HeadSet;

    #[test]
    fn pruned_heads_are_switched_off_and_counted() {
        let mut s = HeadSet::with_pruned(4, [1, 3, 9]);
        assert_eq!((s.len(), s.active_count(), s.pruned_count()), (4, 2, 2));
        assert!(s.is_active(0) && s.is_pruned(1) && !s.is_active(3));
        assert_eq!(s.pruned().collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(s.active().collect::<Vec<_>>(), vec![0, 2]);
        s.toggle(1);
        s.set(0, false);
        assert_eq!(s, HeadSet::with_pruned(4, [0, 3]));
        assert!(s.any_pruned());
        s.restore_all();
        assert_eq!(s, HeadSet::all(4));
        assert!(!s.any_pruned());
        assert!(HeadSet::all(0).is_empty());
    }

    #[test]
    fn resizing_keeps_the_heads_both_models_have() {
        let s = HeadSet::with_pruned(6, [1, 5]);
        assert_eq!(s.resized(3), HeadSet::with_pruned(3, [1]));
        assert_eq!(s.resized(8), HeadSet::with_pruned(8, [1, 5]));
        assert_eq!(s.resized(0), HeadSet::all(0));
    }

    #[test]
    fn the_first_differing_layer_is_found_per_layer() {
        let none = HeadSet::all(12);
        assert_eq!(none.first_differing_layer(&none, 4), None);
        assert_eq!(none.first_differing_layer(&HeadSet::with_pruned(12, [5, 11]), 4), Some(1));
        assert_eq!(HeadSet::with_pruned(12, [0]).first_differing_layer(&none, 4), Some(0));
        assert_eq!(HeadSet::with_pruned(12, [8, 2]).pruned_in_layer(2, 4).collect::<Vec<_>>(), vec![0]);
    }
}
