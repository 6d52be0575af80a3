//! The engine: one wasmtime engine, WASI p2 with an empty context, a memory limit and an epoch
//! deadline on every call. A component that loops, allocates without bound or panics fails that one call.
//!
//! Instances are kept warm between calls (a small pool per component, as docs/design.md allows): building a store,
//! the WASI context and the component's core instances was ~90 % of a decode. An instance is thrown away after
//! any trap or timeout, once it has written to stderr or grown its memories by a quarter of the limit, and after
//! a fixed number of calls, so a misbehaving component still fails only its own calls.

use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store,
    StoreLimits, StoreLimitsBuilder,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// How often the engine's epoch advances; call deadlines are whole multiples of it.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// At most this much of a component's stderr is kept for error messages.
const STDERR_CAPTURE_BYTES: usize = 4096;

/// Limits applied to every call into a component.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Linear memory a component instance may grow to.
    pub memory_bytes: usize,
    /// Wall-clock budget of one call.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            deadline: Duration::from_millis(250),
        }
    }
}

/// Why a call into a component did not return normally.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("component exceeded its {0:?} time budget")]
    Timeout(Duration),
    #[error("component trapped: {trap}{}", stderr_suffix(.stderr))]
    Trap { trap: String, stderr: String },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {})", stderr.trim())
    }
}

/// Component instances alive at once (warm ones and calls in flight) that the pool holds; ample for the
/// ingest pipeline, canaries, the components kept for rollback and the hyp shaper together.
const POOL_INSTANCES: u32 = 128;
/// Idle instances kept per loaded component.
const WARM_PER_COMPONENT: usize = 2;
/// Calls one instance serves before it is replaced, so whatever a component keeps between calls stays bounded.
const CALLS_PER_INSTANCE: u32 = 10_000;

/// A store's state: an empty WASI context, its resource table, the limits, the captured stderr and how far the
/// instance's memories have grown.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    stderr: MemoryOutputPipe,
    memory_grown: usize,
}

impl ResourceLimiter for CallState {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if allowed {
            self.memory_grown += desired.saturating_sub(current);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }
}

/// An instance with its own store, and how many calls it has served.
struct Warm<I> {
    store: Store<CallState>,
    instance: I,
    calls: u32,
}

/// The idle instances of one loaded component.
pub(crate) struct WarmInstances<I> {
    idle: Mutex<Vec<Warm<I>>>,
    /// The component's name, as the operator's metrics count its calls.
    component: String,
}

impl<I> WarmInstances<I> {
    pub(crate) fn new(component: String) -> Self {
        WarmInstances {
            idle: Mutex::new(Vec::new()),
            component,
        }
    }

    /// [`Self::call_warm`], counted by outcome (`ok`, `trap`, `timeout`).
    pub(crate) fn call<R>(
        &self,
        runtime: &Runtime,
        instantiate: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<I>,
        call: impl FnOnce(&I, &mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let returned = self.call_warm(runtime, instantiate, call);
        let outcome = match &returned {
            Ok(_) => "ok",
            Err(CallError::Timeout(_)) => "timeout",
            Err(CallError::Trap { .. }) => "trap",
        };
        metrics::counter!("osds_wasm_calls_total", "component" => self.component.clone(), "outcome" => outcome)
            .increment(1);
        returned
    }

    /// Runs `call` in an idle instance (or a new one from `instantiate`) with the whole deadline. The instance
    /// is kept for the next call only if the call returned, and it has not served its share, written to stderr
    /// or grown its memories by a quarter of the limit.
    fn call_warm<R>(
        &self,
        runtime: &Runtime,
        instantiate: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<I>,
        call: impl FnOnce(&I, &mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut warm = match idle {
            Some(mut warm) => {
                runtime.arm_deadline(&mut warm.store);
                warm
            }
            None => {
                let mut store = runtime.store();
                let instance =
                    instantiate(&mut store).map_err(|e| runtime.call_error(&store, e))?;
                Warm {
                    store,
                    instance,
                    calls: 0,
                }
            }
        };
        let returned = call(&warm.instance, &mut warm.store)
            .map_err(|e| runtime.call_error(&warm.store, e))?;
        warm.calls += 1;
        let state = warm.store.data();
        if warm.calls < CALLS_PER_INSTANCE
            && state.stderr.contents().is_empty()
            && state.memory_grown <= runtime.limits.memory_bytes / 4
        {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < WARM_PER_COMPONENT {
                idle.push(warm);
            }
        }
        Ok(returned)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The engine and linker shared by every component, and the thread that drives epoch deadlines.
pub struct Runtime {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    ticker_stop: Arc<AtomicBool>,
}

impl Runtime {
    pub fn new(limits: Limits) -> anyhow::Result<Arc<Runtime>> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        // New instances come from a pool of pre-reserved slots, so replacing one costs no mapping of a new
        // linear memory. The limiter still enforces `memory_bytes` first.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(POOL_INSTANCES * 8)
            .total_memories(POOL_INSTANCES * 4)
            .total_tables(POOL_INSTANCES * 4)
            .max_memory_size(limits.memory_bytes.saturating_mul(2));
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (weak_engine, stop) = (engine.weak(), ticker_stop.clone());
        thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(EPOCH_TICK);
                    match weak_engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Arc::new(Runtime {
            engine,
            linker,
            limits,
            ticker_stop,
        }))
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Compiles a component from its bytes (the costly step; done once per component).
    pub fn compile(&self, wasm: &[u8]) -> anyhow::Result<Component> {
        Ok(Component::new(&self.engine, wasm)?)
    }

    /// The steps every component takes to be loaded: compile, check the version of its world (`world`), type-check
    /// against it (`typed` builds the world's pre-instantiated form), instantiate once and ask for its info.
    /// Returns the pre-instantiated component, its info and the lowercase hex SHA-256 of `wasm`.
    pub(crate) fn load<P, I>(
        &self,
        wasm: &[u8],
        world: crate::worlds::World,
        typed: impl FnOnce(InstancePre<CallState>) -> wasmtime::Result<P>,
        info: impl FnOnce(&P, &mut Store<CallState>) -> wasmtime::Result<I>,
    ) -> anyhow::Result<(P, I, String)> {
        let component = self.compile(wasm)?;
        world.check(&self.engine, &component)?;
        let instance_pre = self.linker.instantiate_pre(&component)?;
        let pre = typed(instance_pre)
            .map_err(|e| anyhow::anyhow!("not an {} component: {e:#}", world.id()))?;
        let mut store = self.store();
        let info = info(&pre, &mut store).map_err(|e| self.call_error(&store, e))?;
        Ok((pre, info, hex::encode(Sha256::digest(wasm))))
    }

    /// A fresh store with the memory limit and the epoch deadline armed.
    pub(crate) fn store(&self) -> Store<CallState> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE_BYTES);
        let wasi = wasmtime_wasi::WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .build();
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(
            &self.engine,
            CallState {
                wasi,
                table: ResourceTable::new(),
                limits,
                stderr,
                memory_grown: 0,
            },
        );
        store.limiter(|state| state);
        self.arm_deadline(&mut store);
        store.epoch_deadline_trap();
        store
    }

    /// Gives the next call in `store` the whole deadline, counted from now.
    fn arm_deadline(&self, store: &mut Store<CallState>) {
        let ticks = self
            .limits
            .deadline
            .as_nanos()
            .div_ceil(EPOCH_TICK.as_nanos())
            .max(1);
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    }

    /// Turns a wasmtime error from a call in `store` into a [`CallError`].
    pub(crate) fn call_error(&self, store: &Store<CallState>, error: wasmtime::Error) -> CallError {
        if matches!(
            error.downcast_ref::<wasmtime::Trap>(),
            Some(wasmtime::Trap::Interrupt)
        ) {
            return CallError::Timeout(self.limits.deadline);
        }
        let stderr = String::from_utf8_lossy(&store.data().stderr.contents()).into_owned();
        CallError::Trap {
            trap: format!("{error:#}"),
            stderr,
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}
