//! A query fragment as a plan node of the distributed engine: [`FragmentExec`] (one task per
//! shard, each running the fragment on nearflow over its shard), its codec (how the engine
//! ships it to a worker) and the table the coordinator reads it through.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_err, internal_err, DataFusionError, Result};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use datafusion_distributed::{DistributedTaskContext, NetworkCoalesceExec};
use datafusion_proto::physical_plan::{PhysicalExtensionCodec, PhysicalProtoConverterExtension};
use nearflow_sparql::fragment::{Fragment, GivenRows};
use nearflow_sparql::Form;
use prost::Message;

use crate::{ClusterError, ShardServer};

/// Batches a task keeps ready ahead of the engine's reading: back-pressure on the shard's run.
const AHEAD: usize = 4;

fn schema_of(width: usize) -> SchemaRef {
    Arc::new(Schema::new(
        (0..width)
            .map(|i| Field::new(format!("c{i}"), DataType::UInt32, false))
            .collect::<Vec<_>>(),
    ))
}

/// A fragment of a query on a sharded store: task `t` of `T` runs it on shards `t`, `t + T`, …
/// of the worker's folder, nearflow's plan on nearflow's runtime, and streams the rows as
/// `UInt32` ids.
#[derive(Debug)]
pub struct FragmentExec {
    text: String,
    width: usize,
    shards: usize,
    fingerprint: u32,
    props: Arc<PlanProperties>,
    server: Option<Arc<ShardServer>>,
}

impl fmt::Debug for ShardServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardServer")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl FragmentExec {
    fn new(
        text: String,
        width: usize,
        shards: usize,
        fingerprint: u32,
        server: Option<Arc<ShardServer>>,
    ) -> Self {
        let props = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema_of(width)),
            datafusion::physical_expr::Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        FragmentExec {
            text,
            width,
            shards,
            fingerprint,
            props,
            server,
        }
    }

    /// The shards it runs on: its tasks.
    pub fn shards(&self) -> usize {
        self.shards
    }
}

impl DisplayAs for FragmentExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "nearflow fragment on {} shards: {}",
            self.shards, self.text
        )
    }
}

impl ExecutionPlan for FragmentExec {
    fn name(&self) -> &str {
        "FragmentExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        _partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(server) = self.server.clone() else {
            return exec_err!(
                "a fragment runs on a worker, not in the coordinator (a stage of one task)"
            );
        };
        if server.fingerprint != self.fingerprint {
            return exec_err!(
                "the worker serves {} (manifest {:08x}), another sharded store than the \
                 coordinator's (manifest {:08x})",
                server.dir.display(),
                server.fingerprint,
                self.fingerprint
            );
        }
        let task = DistributedTaskContext::from_ctx(&context);
        let mine: Vec<usize> = (task.task_index..self.shards)
            .step_by(task.task_count.max(1))
            .collect();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<RecordBatch>>(AHEAD);
        let (text, width) = (self.text.clone(), self.width);
        std::thread::Builder::new()
            .name("nearflow-fragment".into())
            .spawn(move || {
                for shard in mine {
                    if let Err(e) = run_on_shard(&server, shard, &text, width, &tx) {
                        let _ = tx.blocking_send(Err(DataFusionError::Execution(format!(
                            "shard {shard}: {e}"
                        ))));
                        return;
                    }
                }
            })
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema_of(self.width),
            stream,
        )))
    }
}

/// Runs the fragment on one shard, sending its rows a batch at a time; stops early when the
/// engine stops reading.
fn run_on_shard(
    server: &ShardServer,
    shard: usize,
    text: &str,
    width: usize,
    tx: &tokio::sync::mpsc::Sender<Result<RecordBatch>>,
) -> Result<(), ClusterError> {
    let store = server.shard(shard)?;
    let prepared = nearflow_sparql::prepare(&store, text, &server.options)?;
    let Form::Select(cols) = &prepared.form else {
        return Err(ClusterError::Engine("a fragment is a SELECT".into()));
    };
    let cols: Vec<usize> = cols.iter().map(|(_, c)| *c).collect();
    if cols.len() != width {
        return Err(ClusterError::Engine(format!(
            "the fragment has {} columns, the coordinator expects {width}",
            cols.len()
        )));
    }
    let mut running = prepared.start(&server.rt)?;
    while let Some(rows) = running.next_batch() {
        let batch = to_batch(&rows, &cols).map_err(|e| ClusterError::Engine(e.to_string()))?;
        if tx.blocking_send(Ok(batch)).is_err() {
            running.cancel();
            let _ = running.finish();
            return Ok(());
        }
    }
    running.finish()?;
    Ok(())
}

/// A batch of solution rows as a record batch of the projected columns' ids.
fn to_batch(rows: &nearflow_sparql::Rows, cols: &[usize]) -> Result<RecordBatch> {
    let schema = schema_of(cols.len());
    if cols.is_empty() {
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        return Ok(RecordBatch::try_new_with_options(schema, vec![], &options)?);
    }
    let arrays: Vec<ArrayRef> = cols
        .iter()
        .map(|&c| Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r[c]))) as ArrayRef)
        .collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}

/// Appends a batch's ids, row after row, to a fragment's rows.
pub(crate) fn append_ids(
    batch: &RecordBatch,
    width: usize,
    out: &mut GivenRows,
) -> Result<(), ClusterError> {
    if batch.num_columns() != width {
        return Err(ClusterError::Engine(format!(
            "a fragment's batch of {} columns, {width} expected",
            batch.num_columns()
        )));
    }
    let cols: Vec<&UInt32Array> = batch
        .columns()
        .iter()
        .map(|a| a.as_any().downcast_ref::<UInt32Array>())
        .collect::<Option<_>>()
        .ok_or_else(|| ClusterError::Engine("a fragment's column is not of ids".into()))?;
    if cols.iter().any(|c| c.null_count() > 0) {
        return Err(ClusterError::Engine("a fragment's column has nulls".into()));
    }
    let n = batch.num_rows();
    out.ids.reserve(n * width);
    for i in 0..n {
        out.ids.extend(cols.iter().map(|c| c.value(i)));
    }
    out.rows += n;
    Ok(())
}

/// A fragment as a table the coordinator reads: its scan is the [`FragmentExec`].
#[derive(Debug)]
pub(crate) struct FragmentTable {
    text: String,
    width: usize,
    shards: usize,
    fingerprint: u32,
}

impl FragmentTable {
    pub(crate) fn new(f: &Fragment, shards: usize, fingerprint: u32) -> Self {
        FragmentTable {
            text: f.shard_text(),
            width: f.cols.len(),
            shards,
            fingerprint,
        }
    }
}

#[async_trait]
impl TableProvider for FragmentTable {
    fn schema(&self) -> SchemaRef {
        schema_of(self.width)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if projection.is_some_and(|p| *p != (0..self.width).collect::<Vec<_>>()) {
            return internal_err!("a fragment is read whole");
        }
        // A stage of its own, one task per shard, its rows collected here: the network
        // boundary is the plan's, not left to the engine's planner (which keeps a leaf of one
        // partition in the coordinator).
        let leaf = Arc::new(FragmentExec::new(
            self.text.clone(),
            self.width,
            self.shards,
            self.fingerprint,
            None,
        ));
        Ok(Arc::new(NetworkCoalesceExec::try_new(
            leaf,
            self.shards,
            1,
        )?))
    }
}

/// How the engine encodes a [`FragmentExec`] to ship it, and decodes it in a worker, where it
/// gets the worker's [`ShardServer`].
#[derive(Debug)]
pub struct FragmentCodec {
    server: Option<Arc<ShardServer>>,
}

impl FragmentCodec {
    /// The codec of a worker serving `server`, or of the coordinator (`None`).
    pub fn new(server: Option<Arc<ShardServer>>) -> Self {
        FragmentCodec { server }
    }
}

#[derive(Clone, PartialEq, ::prost::Message)]
struct FragmentProto {
    #[prost(string, tag = "1")]
    text: String,
    #[prost(uint32, tag = "2")]
    width: u32,
    #[prost(uint32, tag = "3")]
    shards: u32,
    #[prost(fixed32, tag = "4")]
    fingerprint: u32,
}

impl PhysicalExtensionCodec for FragmentCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        _ctx: &TaskContext,
        _proto: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !inputs.is_empty() {
            return internal_err!("a fragment has no inputs, got {}", inputs.len());
        }
        let p = FragmentProto::decode(buf)
            .map_err(|e| DataFusionError::Internal(format!("a fragment's encoding: {e}")))?;
        Ok(Arc::new(FragmentExec::new(
            p.text,
            p.width as usize,
            p.shards as usize,
            p.fingerprint,
            self.server.clone(),
        )))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        _proto: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let Some(f) = node.downcast_ref::<FragmentExec>() else {
            return internal_err!("not a fragment: {}", node.name());
        };
        let p = FragmentProto {
            text: f.text.clone(),
            width: f.width as u32,
            shards: f.shards as u32,
            fingerprint: f.fingerprint,
        };
        p.encode(buf)
            .map_err(|e| DataFusionError::Internal(format!("a fragment's encoding: {e}")))
    }
}
