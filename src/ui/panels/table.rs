//! The seed's model table, sortable, with d_k computed; choosing a row shows that model in the
//! chart above it and in every panel.

use leptos::prelude::*;

use crate::attention::config::{presets_sorted, PresetColumn};
use crate::settings::ModelChoice;
use crate::ui::state::AppState;

/// The seven models of the seed as a table.
#[component]
pub fn ModelTable() -> impl IntoView {
    let state = AppState::get();
    let sort = RwSignal::new((PresetColumn::Seed, true));
    let current = move || match state.settings.read().model {
        ModelChoice::Preset(p) => Some(p.id),
        _ => None,
    };
    let header = move |column: PresetColumn| {
        let aria_sort = move || match sort.get() {
            (c, true) if c == column => "ascending",
            (c, false) if c == column => "descending",
            _ => "none",
        };
        view! {
            <th scope="col" aria-sort=aria_sort>
                <button
                    class="sort"
                    data-testid=format!("sort-{}", column.heading())
                    on:click=move |_| sort.update(|(c, up)| {
                        *up = if *c == column { !*up } else { true };
                        *c = column;
                    })
                >
                    {column.heading()}
                    {move || match sort.get() {
                        (c, true) if c == column => " ▲",
                        (c, false) if c == column => " ▼",
                        _ => "",
                    }}
                </button>
            </th>
        }
    };
    view! {
        <table class="model-table" data-testid="model-table">
            <caption>"The seed's models: sort by a column; choose one to show it in the chart and the panels."</caption>
            <thead>
                <tr>{PresetColumn::ALL.map(header).into_iter().collect_view()}<th scope="col">"d_k in 64..128?"</th></tr>
            </thead>
            <tbody>
                {move || {
                    let (column, up) = sort.get();
                    presets_sorted(column, up)
                        .into_iter()
                        .map(|(i, p)| {
                            let chosen = move || current() == Some(p.id);
                            view! {
                                <tr class:current=chosen aria-current=move || chosen().then_some("true") data-testid=format!("model-row-{}", p.id)>
                                    <td>{i + 1}</td>
                                    <td>
                                        <button
                                            class="link"
                                            data-testid=format!("model-pick-{}", p.id)
                                            on:click=move |_| state.settings.update(|s| s.model = ModelChoice::Preset(p))
                                        >
                                            {p.name}
                                        </button>
                                    </td>
                                    <td>{p.d_model}</td>
                                    <td>{p.num_heads}</td>
                                    <td data-testid="model-dk">{p.d_k()}</td>
                                    <td>{if (64..=128).contains(&p.d_k()) { "yes" } else { "no" }}</td>
                                </tr>
                            }
                        })
                        .collect_view()
                }}
            </tbody>
        </table>
    }
}
