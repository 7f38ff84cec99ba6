//! The pruning curves measured so far (task quality against heads pruned, per order), and the
//! JSON the browser keeps them in. How they are computed is `crate::jobs::curves`.
//!
//! The JSON is walked through `serde_json::Value` rather than derived: a derive for this shape
//! costs the page about 9 KB of gzipped wasm it does not have to spare (BENCHMARKS.md
//! section 19); the round trip is tested below.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::model::digits::quality_text;
use crate::model::intervals::{Bootstrap, Estimate, Spread};
use crate::model::spec::ModelSpec;

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
    /// Per order, how sure each point is ([`crate::model::intervals`]), where its cosines were measured
    /// here (points of an older cache have none).
    pub spreads: BTreeMap<Order, BTreeMap<usize, Spread>>,
    /// The full model's cosine for each pair: what every point's change is paired with.
    pub full_cosines: Option<Vec<f64>>,
}

impl Curves {
    /// Nothing measured yet, for a model of `heads` heads.
    pub fn new(heads: usize) -> Curves {
        Curves {
            heads,
            points: BTreeMap::new(),
            one_per_layer: None,
            iterative_order: Vec::new(),
            spreads: BTreeMap::new(),
            full_cosines: None,
        }
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

    /// Records the point at `k` pruned in `order` from its pair cosines: its quality, and how
    /// sure it is by `bootstrap`'s resamples (the full model's cosines kept at `k` = 0).
    pub fn record_cosines(&mut self, order: Order, k: usize, cosines: &[f64], bootstrap: &Bootstrap) {
        let full = self.full_cosines.as_deref().filter(|_| k != 0);
        let Some(spread) = bootstrap.spread(cosines, full) else {
            return self.record(order, k, 0.0);
        };
        if k == 0 {
            self.full_cosines = Some(cosines.to_vec());
        }
        self.record(order, k, spread.quality.value);
        self.spreads.entry(order).or_default().insert(k, spread);
    }

    /// How sure the point of `order` at `k` pruned is, if its cosines were measured here (the
    /// ends count for every order).
    pub fn spread(&self, order: Order, k: usize) -> Option<Spread> {
        if k == 0 || k == self.heads {
            return self.spreads.values().find_map(|p| p.get(&k).copied());
        }
        self.spreads.get(&order)?.get(&k).copied()
    }

    /// `order`'s 95 % band: `(k, lo, hi)` at every point whose spread is known.
    pub fn band(&self, order: Order) -> Vec<(usize, f64, f64)> {
        let ks = self.curve(order).into_iter().map(|(k, _)| k);
        ks.filter_map(|k| self.spread(order, k).map(|s| (k, s.quality.lo, s.quality.hi))).collect()
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
        c.spreads.remove(&order);
        c
    }

    /// Only `order`'s points.
    pub fn only(&self, order: Order) -> Curves {
        let points = self.points.get(&order).map(|p| [(order, p.clone())].into()).unwrap_or_default();
        let spreads = self.spreads.get(&order).map(|p| [(order, p.clone())].into()).unwrap_or_default();
        Curves { points, spreads, full_cosines: self.full_cosines.clone(), ..Curves::new(self.heads) }
    }

    /// These curves with `other`'s points and findings added (`other` wins where both have one).
    pub fn merged(mut self, other: &Curves) -> Curves {
        for (order, points) in &other.points {
            self.points.entry(*order).or_default().extend(points);
        }
        for (order, spreads) in &other.spreads {
            self.spreads.entry(*order).or_default().extend(spreads);
        }
        if other.full_cosines.is_some() {
            self.full_cosines = other.full_cosines.clone();
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
        let full = self.spread(Order::Iterative, 0).map_or_else(|| quality_text(full), |s| s.quality.text());
        let changes = self.changes_at(&[m20, m40]).map(|c| format!(" {c}")).unwrap_or_default();
        Some(format!(
            "Full model: {full}. Heads pruned {}; {}; {}. One head per layer ({} pruned): {}. All {total} pruned (no attention at all): {}.{changes}",
            row(m20),
            row(m40),
            row(total / 2),
            spec.one_per_layer_pruned(),
            shown(self.one_per_layer),
            shown(self.at(Order::Iterative, total)),
        ))
    }

    /// What the pairs allow one to say of the iterative and one-shot orders at `ks` pruned against
    /// the full model, where their changes are known: "Against the full model, paired over the
    /// same resamples: iterative at 14 pruned, no change detectable …; at 29, a loss of …".
    fn changes_at(&self, ks: &[usize]) -> Option<String> {
        let said: Vec<String> = [(Order::Iterative, "iterative"), (Order::OneShot, "one-shot")]
            .into_iter()
            .filter_map(|(order, name)| {
                let each: Vec<String> = ks
                    .iter()
                    .filter_map(|&k| {
                        Some(format!("at {k} pruned, {}", self.spread(order, k)?.change?.change_text()))
                    })
                    .collect();
                (!each.is_empty()).then(|| format!("{name} {}", each.join("; ")))
            })
            .collect();
        (!said.is_empty()).then(|| {
            format!(
                "Against the full model, paired over the same resamples of the pairs: {}.",
                said.join("; ")
            )
        })
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
        let spreads: serde_json::Map<String, Value> = self
            .spreads
            .iter()
            .map(|(o, p)| {
                let row = |(k, s): (&usize, &Spread)| match s.change {
                    Some(c) => json!([k, s.quality.lo, s.quality.hi, c.value, c.lo, c.hi]),
                    None => json!([k, s.quality.lo, s.quality.hi]),
                };
                (name(o), Value::Array(p.iter().map(row).collect()))
            })
            .collect();
        json!({
            "version": 1,
            "points": points,
            "one_per_layer": self.one_per_layer,
            "iterative_order": self.iterative_order,
            "spreads": spreads,
            "full_cosines": self.full_cosines,
        })
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
        let order_of = |name: &str| match name {
            "iterative" => Some(Order::Iterative),
            "one-shot" => Some(Order::OneShot),
            r => Some(Order::Random(r.strip_prefix("random-")?.parse().ok().filter(|s| *s < RANDOM_SEEDS)?)),
        };
        for (name, pts) in v.get("points")?.as_object()? {
            let order = order_of(name)?;
            for p in pts.as_array()? {
                let (k, q) = (p.get(0)?.as_u64()? as usize, p.get(1)?.as_f64()?);
                (k <= heads && q.is_finite()).then_some(())?;
                curves.record(order, k, q);
            }
        }
        // How sure each point is, where the cache has it (an older one has none).
        for (name, rows) in v.get("spreads").and_then(Value::as_object).into_iter().flatten() {
            let order = order_of(name)?;
            for r in rows.as_array()? {
                let k = r.get(0)?.as_u64()? as usize;
                let n = |i: usize| r.get(i).and_then(Value::as_f64).filter(|v| v.is_finite());
                let value = curves.at(order, k)?;
                let quality = Estimate { value, lo: n(1)?, hi: n(2)? };
                let change = match r.as_array()?.len() {
                    3 => None,
                    _ => Some(Estimate { value: n(3)?, lo: n(4)?, hi: n(5)? }),
                };
                curves.spreads.entry(order).or_default().insert(k, Spread { quality, change });
            }
        }
        if let Some(c) = v.get("full_cosines").and_then(Value::as_array) {
            curves.full_cosines = Some(c.iter().map(Value::as_f64).collect::<Option<_>>()?);
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
    fn points_from_cosines_carry_their_intervals_and_their_change_from_the_full_model() {
        let scores: Vec<f64> = (0..40).map(|i| ((i * 7) % 40) as f64 / 40.0).collect();
        let b = Bootstrap::new(&scores, 200, 1);
        let full: Vec<f64> =
            scores.iter().enumerate().map(|(i, s)| s + 0.05 * ((i * 13 % 7) as f64)).collect();
        let mut c = Curves::new(8);
        c.record_cosines(Order::Iterative, 0, &full, &b);
        // The full model is every order's first point, and has no change from itself.
        let s0 = c.spread(Order::OneShot, 0).unwrap();
        assert!(
            s0.change.is_none() && s0.quality.lo <= s0.quality.value && s0.quality.value <= s0.quality.hi
        );
        assert_eq!(c.full_cosines.as_deref(), Some(&full[..]));
        // The cosines given to other pairs: a loss, and its interval says so.
        let shuffled: Vec<f64> = full.iter().rev().copied().collect();
        c.record_cosines(Order::Iterative, 4, &shuffled, &b);
        let s4 = c.spread(Order::Iterative, 4).unwrap();
        assert!(s4.change.unwrap().hi < 0.0, "{s4:?}");
        assert_eq!(c.at(Order::Iterative, 4), Some(s4.quality.value));
        assert_eq!(c.band(Order::Iterative).iter().map(|b| b.0).collect::<Vec<_>>(), vec![0, 4]);
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
        // With the points' intervals: the full model's, and what the marks' changes allow.
        let q = |value, lo, hi| Estimate { value, lo, hi };
        let full = Spread { quality: q(0.8134, 0.78, 0.845), change: None };
        c.spreads.entry(Order::Iterative).or_default().insert(0, full);
        let mark = Spread { quality: q(0.8, 0.76, 0.83), change: Some(q(-0.0134, -0.02, -0.006)) };
        c.spreads.entry(Order::Iterative).or_default().insert(2, mark);
        let text = c.summary(&spec).unwrap();
        assert!(
            text.starts_with("Full model: 0.813 (0.780 to 0.845). Heads pruned 2: iterative 0.800"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "Against the full model, paired over the same resamples of the pairs: iterative at 2 pruned, \
                 a loss of 0.013 (95 % interval 0.006 to 0.020)."
            ),
            "{text}"
        );
    }

    #[test]
    fn the_saved_form_round_trips_and_refuses_another_models_curves() {
        let mut c = Curves::new(8);
        c.record(Order::Iterative, 3, 0.75);
        c.record(Order::Random(2), 5, -0.125);
        c.one_per_layer = Some(0.5);
        c.iterative_order = vec![7, 0, 3];
        let q = |value, lo, hi| Estimate { value, lo, hi };
        c.spreads
            .entry(Order::Iterative)
            .or_default()
            .insert(3, Spread { quality: q(0.75, 0.7, 0.8), change: Some(q(-0.01, -0.02, 0.001)) });
        c.spreads
            .entry(Order::Random(2))
            .or_default()
            .insert(5, Spread { quality: q(-0.125, -0.2, 0.0), change: None });
        c.full_cosines = Some(vec![0.5, -0.25, 1.0]);
        let text = c.to_json();
        assert_eq!(Curves::from_json(&text, 8), Some(c.clone()));
        // A model of fewer heads cannot have head 7, nor a point at 7 pruned of 6.
        assert_eq!(Curves::from_json(&text, 6), None);
        assert_eq!(Curves::from_json("{\"version\":2}", 8), None);
        assert_eq!(Curves::from_json("not json", 8), None);
        let merged = Curves::new(8).merged(&c.only(Order::Random(2)));
        assert_eq!(merged.curve(Order::Random(2)), vec![(5, -0.125)]);
        assert_eq!(merged.band(Order::Random(2)), vec![(5, -0.2, 0.0)]);
        assert_eq!(merged.full_cosines, c.full_cosines);
        assert!(!c.without(Order::Iterative).points.contains_key(&Order::Iterative));
        assert!(c.without(Order::Iterative).band(Order::Iterative).is_empty());
        // A cache from before the spreads: the points, without them.
        let old =
            r#"{"version":1,"points":{"iterative":[[3,0.75]]},"one_per_layer":null,"iterative_order":[]}"#;
        let read = Curves::from_json(old, 8).unwrap();
        assert_eq!((read.at(Order::Iterative, 3), read.spread(Order::Iterative, 3)), (Some(0.75), None));
    }
}
