//! graphile-worker's side of bench/graphile.sh: `node bench.mjs migrate` installs
//! graphile-worker's schema; `node bench.mjs run` runs its queue with one task, `mark_paid`,
//! the guarded UPDATE inbound's `orders.mark_paid` runs (crates/example/src/store/orders.rs),
//! until SIGTERM. Environment: GRAPHILE_NODE_DIR (where graphile-worker@0.18.0 is installed),
//! GRAPHILE_DATABASE_URL, GRAPHILE_CONCURRENCY (default 32), GRAPHILE_LOCAL_QUEUE (default 500).
//!
//! The options are the documented performance configuration
//! (https://worker.graphile.org/docs/performance, and graphile-worker's perfTest/
//! graphile.config.js); see the header of bench/graphile.sh for why each is used.
import { pathToFileURL } from "node:url";

const { run, runMigrations, Logger } = await import(
  pathToFileURL(`${process.env.GRAPHILE_NODE_DIR}/node_modules/graphile-worker/dist/index.js`).href
);

const connectionString = process.env.GRAPHILE_DATABASE_URL;
const concurrency = Number(process.env.GRAPHILE_CONCURRENCY || 32);
const localQueueSize = Number(process.env.GRAPHILE_LOCAL_QUEUE || 500);
// The benchmark integration's tenant (bench/lib.sh's config: tenant = "bench").
const TENANT = "bench";

// Warnings and errors only, as inbound's binaries run with RUST_LOG=warn.
const logger = new Logger(() => (level, message) => {
  if (level === "error" || level === "warning") console.error(`graphile ${level}: ${message}`);
});

// inbound_example's mark_paid, verbatim (schema-qualified like the original).
const MARK_PAID = `UPDATE inbound_example.orders
         SET status = 'paid', amount_received_minor = $4, paid_receipt_id = $6,
             paid_at = now(), updated_at = now()
         WHERE tenant_id = $1 AND id = $2 AND status = 'awaiting_payment'
           AND provider_payment_id = $3 AND total_minor = $4 AND lower(currency) = lower($5)`;

// The job's payload is the receipt's Stripe event plus `receipt_id`: the order id, payment
// id, amount and currency are read from it as inbound's handler reads the receipt payload.
async function mark_paid(payload, helpers) {
  const object = payload?.data?.object;
  if (object?.status !== "succeeded" || object?.metadata?.order_id == null) {
    throw new Error(`job ${helpers.job.id}: not a succeeded PaymentIntent for an order`);
  }
  const { rowCount } = await helpers.withPgClient((client) =>
    client.query({
      name: "inbound_mark_paid",
      text: MARK_PAID,
      values: [
        TENANT,
        object.metadata.order_id,
        object.id,
        object.amount_received,
        object.currency,
        payload.receipt_id,
      ],
    }),
  );
  if (rowCount !== 1) {
    // inbound would classify the unpaid order; here it can only mean a broken benchmark.
    throw new Error(`order ${object.metadata.order_id} was not marked paid`);
  }
}

const preset = {
  worker: {
    connectionString,
    logger,
    concurrentJobs: concurrency,
    maxPoolSize: concurrency + 1,
    localQueue: { size: localQueueSize },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
    preparedStatements: true,
    // No crontab: it would be looked for in the working directory.
    crontabFile: `${process.env.GRAPHILE_WORK_DIR || "/nonexistent"}/crontab`,
  },
};

const mode = process.argv[2];
if (mode === "migrate") {
  await runMigrations({ preset });
} else if (mode === "run") {
  const runner = await run({ preset, taskList: { mark_paid } });
  console.error(`graphile-worker: running ${process.uptime().toFixed(3)} s after node started`);
  await runner.promise;
} else {
  console.error("usage: node bench.mjs migrate|run");
  process.exit(2);
}
