//! An encoder's long work: the engine's part for an encoder ([`engine`]: its page passes, the
//! unpruned passes it keeps), every head's importance by removing it alone ([`sweep`]), the
//! task's importance, the quality of a set of heads and the heads' roles ([`task`]), the pruning
//! curves ([`curves`]), activation patching ([`patching`]), the pruned-forward and precision
//! timings ([`timing`]) and what each lever buys ([`levers`]).

pub mod curves;
pub mod engine;
pub mod levers;
pub mod patching;
pub mod sweep;
pub mod task;
pub mod timing;
