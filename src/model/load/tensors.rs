//! Named tensors as a family's `from_tensors` takes them: each fetched by name and checked
//! against the shape the family's table ([`super::names`]) gives it, and the one layout adapter a
//! family needs (GPT-2's `Conv1D` weights are stored `[in, out]`: [`transpose`]).

/// Why weights could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the model's weights are unusable: {}", self.0)
    }
}

/// Tensors by name from `get`, each checked against the shape `names` gives it: a missing one and
/// one of another shape are refused by name.
pub fn checked(
    names: Vec<(String, Vec<usize>)>,
    mut get: impl FnMut(&str) -> Option<(Vec<usize>, Vec<f32>)>,
) -> impl FnMut(&str) -> Result<Vec<f32>, LoadError> {
    let shapes: std::collections::HashMap<String, Vec<usize>> = names.into_iter().collect();
    move |name: &str| {
        let (shape, data) = get(name).ok_or_else(|| LoadError(format!("{name} is missing")))?;
        let want = &shapes[name];
        if &shape != want || data.len() != want.iter().product::<usize>() {
            return Err(LoadError(format!("{name} has shape {shape:?}, expected {want:?}")));
        }
        Ok(data)
    }
}

/// `w` (`rows x cols`, row-major) transposed.
pub fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}
