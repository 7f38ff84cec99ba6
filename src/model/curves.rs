//! The pruning curves measured so far (task quality against heads pruned, per order), and the
//! JSON the browser keeps them in. How they are computed is `crate::jobs::curves`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::digits::quality_text;
use super::spec::ModelSpec;

/// Random orders averaged (and drawn as a band).
pub const RANDOM_SEEDS: u32 = 5;

/// Which order a point belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Order {
    /// Least important first, importance measured again every few heads (the head-gate gradient).
    Iterative,
    /// The reader's sentence's order by the page's chosen importance measure.
    OneShot,
    /// A random order, by seed index.
    Random(u32),
}

/// Every quality measured so far for a model of `heads` heads: `k` heads pruned -> Spearman
/// correlation, per order.
#[derive(Clone, Debug, PartialEq)]
pub struct Curves {
    /// The model's heads: the curves run from 0 to this many pruned.
    pub heads: usize,
    /// Per order, quality by heads pruned. 0 and `heads` pruned are shared by all.
    pub points: BTreeMap<Order, BTreeMap<usize, f64>>,
    /// Quality with each layer's most important head kept (by the full model's importance).
    pub one_per_layer: Option<f64>,
    /// The iterative order as far as it is known (least important first).
    pub iterative_order: Vec<usize>,
}

impl Curves {
    /// Nothing measured yet, for a model of `heads` heads.
    pub fn new(heads: usize) -> Curves {
        Curves { heads, points: BTreeMap::new(), one_per_layer: None, iterative_order: Vec::new() }
    }

    /// The quality of `order` at `k` pruned, if measured (the ends count for every order).
    pub fn at(&self, order: Order, k: usize) -> Option<f64> {
        let shared = |k| self.points.values().find_map(|p| p.get(&k).copied());
        if k == 0 || k == self.heads {
            return shared(k);
        }
        self.points.get(&order)?.get(&k).copied()
    }

    /// Records `quality` at `k` pruned in `order`.
    pub fn record(&mut self, order: Order, k: usize, quality: f64) {
        self.points.entry(order).or_default().insert(k, quality);
    }

    /// The curve of one order: `(k, quality)` for every measured `k`, ends included.
    pub fn curve(&self, order: Order) -> Vec<(usize, f64)> {
        let mut ks: Vec<usize> =
            self.points.get(&order).map(|p| p.keys().copied().collect()).unwrap_or_default();
        ks.extend([0, self.heads]);
        ks.sort_unstable();
        ks.dedup();
        ks.into_iter().filter_map(|k| Some((k, self.at(order, k)?))).collect()
    }

    /// The random orders at every `k` all of them have: `(k, mean, min, max)`.
    pub fn random_band(&self) -> Vec<(usize, f64, f64, f64)> {
        let ks = self.curve(Order::Random(0)).into_iter().map(|(k, _)| k);
        ks.filter_map(|k| {
            let q: Vec<f64> =
                (0..RANDOM_SEEDS).map(|s| self.at(Order::Random(s), k)).collect::<Option<_>>()?;
            let mean = q.iter().sum::<f64>() / q.len() as f64;
            Some((
                k,
                mean,
                q.iter().copied().fold(f64::INFINITY, f64::min),
                q.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ))
        })
        .collect()
    }

    /// These curves without `order`'s points (what stays valid when that order changes).
    pub fn without(&self, order: Order) -> Curves {
        let mut c = self.clone();
        c.points.remove(&order);
        c
    }

    /// Only `order`'s points.
    pub fn only(&self, order: Order) -> Curves {
        let points = self.points.get(&order).map(|p| [(order, p.clone())].into()).unwrap_or_default();
        Curves { points, ..Curves::new(self.heads) }
    }

    /// These curves with `other`'s points and findings added (`other` wins where both have one).
    pub fn merged(mut self, other: &Curves) -> Curves {
        for (order, points) in &other.points {
            self.points.entry(*order).or_default().extend(points);
        }
        self.one_per_layer = other.one_per_layer.or(self.one_per_layer);
        if other.iterative_order.len() > self.iterative_order.len() {
            self.iterative_order = other.iterative_order.clone();
        }
        self
    }

    /// The quality of every order at the points the handbook names, for a model of shape `spec`
    /// (`None` before the full model's quality is known): "Full model: 0.813. Heads pruned 14:
    /// iterative …; 29: …; 36: …. One head per layer (66 pruned): …. All 72 pruned …".
    pub fn summary(&self, spec: &ModelSpec) -> Option<String> {
        let full = self.at(Order::Iterative, 0)?;
        let (total, [m20, m40]) = (spec.total_heads(), spec.michel_marks());
        let band = self.random_band();
        let shown = |v: Option<f64>| v.map_or_else(|| "…".to_string(), quality_text);
        let random = |k: usize| shown(band.iter().find(|b| b.0 == k).map(|b| b.1));
        let row = |k: usize| {
            let at = |o: Order| shown(self.at(o, k));
            format!(
                "{k}: iterative {}, one-shot {}, random {}",
                at(Order::Iterative),
                at(Order::OneShot),
                random(k)
            )
        };
        Some(format!(
            "Full model: {}. Heads pruned {}; {}; {}. One head per layer ({} pruned): {}. All {total} pruned (no attention at all): {}.",
            quality_text(full),
            row(m20),
            row(m40),
            row(total / 2),
            spec.one_per_layer_pruned(),
            shown(self.one_per_layer),
            shown(self.at(Order::Iterative, total)),
        ))
    }

    /// As JSON, for the page's cache.
    pub fn to_json(&self) -> String {
        let name = |o: &Order| match o {
            Order::Iterative => "iterative".to_string(),
            Order::OneShot => "one-shot".to_string(),
            Order::Random(s) => format!("random-{s}"),
        };
        let points: serde_json::Map<String, Value> = self
            .points
            .iter()
            .map(|(o, p)| (name(o), Value::Array(p.iter().map(|(k, q)| json!([k, q])).collect())))
            .collect();
        json!({ "version": 1, "points": points, "one_per_layer": self.one_per_layer, "iterative_order": self.iterative_order })
            .to_string()
    }

    /// From [`Curves::to_json`]'s text, for a model of `heads` heads; `None` for anything else
    /// (a stale or foreign cache, or one with a head or a count of heads the model has not).
    pub fn from_json(text: &str, heads: usize) -> Option<Curves> {
        let v: Value = serde_json::from_str(text).ok()?;
        (v.get("version")?.as_u64()? == 1).then_some(())?;
        let order: Vec<usize> = v
            .get("iterative_order")?
            .as_array()?
            .iter()
            .map(|h| h.as_u64().map(|h| h as usize))
            .collect::<Option<_>>()?;
        (order.iter().all(|&h| h < heads) && order.len() <= heads).then_some(())?;
        let mut curves = Curves {
            one_per_layer: v.get("one_per_layer")?.as_f64(),
            iterative_order: order,
            ..Curves::new(heads)
        };
        for (name, pts) in v.get("points")?.as_object()? {
            let order = match name.as_str() {
                "iterative" => Order::Iterative,
                "one-shot" => Order::OneShot,
                r => Order::Random(r.strip_prefix("random-")?.parse().ok().filter(|s| *s < RANDOM_SEEDS)?),
            };
            for p in pts.as_array()? {
                let (k, q) = (p.get(0)?.as_u64()? as usize, p.get(1)?.as_f64()?);
                (k <= heads && q.is_finite()).then_some(())?;
                curves.record(order, k, q);
            }
        }
        Some(curves)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_are_shared_and_the_random_band_needs_every_seed() {
        let mut c = Curves::new(8);
        c.record(Order::Iterative, 0, 0.8);
        c.record(Order::Iterative, 8, 0.1);
        c.record(Order::OneShot, 4, 0.5);
        assert_eq!(c.at(Order::Random(3), 0), Some(0.8));
        assert_eq!(c.curve(Order::OneShot), vec![(0, 0.8), (4, 0.5), (8, 0.1)]);
        for s in 0..RANDOM_SEEDS - 1 {
            c.record(Order::Random(s), 2, 0.6 + s as f64 / 100.0);
        }
        assert_eq!(c.random_band().iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 8], "seed 4 lacks k = 2");
        c.record(Order::Random(RANDOM_SEEDS - 1), 2, 0.7);
        let band = c.random_band();
        assert_eq!(band[1].0, 2);
        assert!((band[1].1 - 0.632).abs() < 1e-12 && band[1].2 == 0.6 && band[1].3 == 0.7, "{band:?}");
    }

    #[test]
    fn the_summary_names_the_marks_of_this_models_heads() {
        let spec = ModelSpec { layers: 2, heads: 4, d_model: 16, ..ModelSpec::MINILM_L6_V2 };
        let mut c = Curves::new(8);
        assert_eq!(c.summary(&spec), None, "nothing before the full model's quality");
        c.record(Order::Iterative, 0, 0.8134);
        c.record(Order::Iterative, 2, 0.8);
        c.record(Order::OneShot, 2, 0.79);
        (0..RANDOM_SEEDS).for_each(|s| c.record(Order::Random(s), 2, 0.7));
        c.one_per_layer = Some(0.5);
        assert_eq!(
            c.summary(&spec).unwrap(),
            "Full model: 0.813. Heads pruned 2: iterative 0.800, one-shot 0.790, random 0.700; 3: iterative …, \
             one-shot …, random …; 4: iterative …, one-shot …, random …. One head per layer (6 pruned): 0.500. \
             All 8 pruned (no attention at all): …."
        );
    }

    #[test]
    fn the_saved_form_round_trips_and_refuses_another_models_curves() {
        let mut c = Curves::new(8);
        c.record(Order::Iterative, 3, 0.75);
        c.record(Order::Random(2), 5, -0.125);
        c.one_per_layer = Some(0.5);
        c.iterative_order = vec![7, 0, 3];
        let text = c.to_json();
        assert_eq!(Curves::from_json(&text, 8), Some(c.clone()));
        // A model of fewer heads cannot have head 7, nor a point at 7 pruned of 6.
        assert_eq!(Curves::from_json(&text, 6), None);
        assert_eq!(Curves::from_json("{\"version\":2}", 8), None);
        assert_eq!(Curves::from_json("not json", 8), None);
        let merged = Curves::new(8).merged(&c.only(Order::Random(2)));
        assert_eq!(merged.curve(Order::Random(2)), vec![(5, -0.125)]);
        assert!(!c.without(Order::Iterative).points.contains_key(&Order::Iterative));
    }
}
