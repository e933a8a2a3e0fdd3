// A consumer on a real Node.js RabbitMQ library, driven by dlqbot's interop
// tests (integration/interop). It takes one JSON argument:
//
//   { "url": "amqp://guest:guest@127.0.0.1:5672", "lib": "rascal" | "amqplib" | "inhouse",
//     "queue": "<source queue>", "dlq": "<dead-letter queue>",
//     "strategy": "forward" | "republish" | "immediateNack" (rascal only),
//     "fail": true | false }
//
// Every delivery its handler sees is written to stdout as one JSON line
// ({"event": "handled", ...}); "ready" is written once it consumes. When
// fail is set the handler fails every message: rascal recovers it with the
// named strategy, amqplib nacks it without requeue (the broker dead-letters
// it), and "inhouse" — a small in-house retry framework on amqplib —
// republishes it to its queue with x-app-attempts until 3 attempts, then
// publishes it to the DLQ itself with its own failure headers (x-app-source,
// x-app-error, x-app-attempts) and acks. Otherwise the handler acks.
// SIGTERM closes the connection and exits; "inhouse" first stops consuming
// and waits for its publishes' confirms, so no delivery it has moved is
// requeued.
'use strict';

const crypto = require('crypto');

const cfg = JSON.parse(process.argv[2]);

function log(o) {
  process.stdout.write(JSON.stringify(o) + '\n');
}

function describe(message, handlerError) {
  const h = message.properties.headers || {};
  const rascal = h.rascal || {};
  return {
    event: 'handled',
    lib: cfg.lib,
    queue: cfg.queue,
    messageId: message.properties.messageId,
    bodySha256: crypto.createHash('sha256').update(message.content).digest('hex'),
    replayId: h['x-replay-id'] || '',
    replayCount: h['x-replay-count'] || 0,
    replayedFrom: h['stroma.dlq.replayed_from'] || '',
    hasXDeath: Array.isArray(h['x-death']) && h['x-death'].length > 0,
    cc: h.CC || null,
    recovery: rascal.recovery || null,
    failed: !!handlerError,
    error: handlerError ? handlerError.message : '',
  };
}

// The failure every failing handler throws: a Node error with a code, as
// rascal records it (rascal.error.message / rascal.error.code).
function failure(message) {
  const n = parseInt(String(message.properties.messageId || '0').replace(/\D/g, ''), 10) || 0;
  const err = new Error(`payment ${1000 + n} declined: card expired`);
  err.code = 'E_DECLINED';
  return err;
}

function recoveryFor(strategy) {
  switch (strategy) {
    case 'forward':
      return [{ strategy: 'forward', publication: 'to_dlq' }, { strategy: 'nack' }];
    case 'republish':
      return [{ strategy: 'republish', attempts: 2 }, { strategy: 'nack' }];
    case 'immediateNack':
      return [{ strategy: 'republish', immediateNack: true }];
    default:
      throw new Error(`unknown strategy ${strategy}`);
  }
}

async function runRascal() {
  const { BrokerAsPromised: Broker } = require('rascal');
  const config = {
    vhosts: {
      '/': {
        connection: { url: cfg.url },
        // The test declares the queues; rascal only checks they exist.
        queues: {
          [cfg.queue]: { assert: false, check: true },
          [cfg.dlq]: { assert: false, check: true },
        },
        publications: { to_dlq: { queue: cfg.dlq, confirm: true } },
        subscriptions: { sub: { queue: cfg.queue, prefetch: 5 } },
      },
    },
  };
  const broker = await Broker.create(config);
  broker.on('error', (err) => log({ event: 'broker_error', error: err.message }));
  const sub = await broker.subscribe('sub');
  sub.on('message', (message, _content, ackOrNack) => {
    const err = cfg.fail ? failure(message) : null;
    log(describe(message, err));
    if (err) ackOrNack(err, recoveryFor(cfg.strategy));
    else ackOrNack();
  });
  sub.on('error', (err) => log({ event: 'subscription_error', error: err.message }));
  sub.on('invalid_content', (err, _message, ackOrNack) => {
    log({ event: 'invalid_content', error: err.message });
    ackOrNack(err);
  });
  log({ event: 'ready' });
  return () => broker.shutdown();
}

async function runAmqplib() {
  const amqp = require('amqplib');
  const conn = await amqp.connect(cfg.url);
  const ch = await conn.createChannel();
  await ch.prefetch(5);
  await ch.checkQueue(cfg.queue);
  await ch.consume(cfg.queue, (message) => {
    if (!message) return;
    const err = cfg.fail ? failure(message) : null;
    log(describe(message, err));
    if (err) ch.nack(message, false, false);
    else ch.ack(message);
  });
  log({ event: 'ready' });
  return () => conn.close();
}

// runInHouse is a team's own retry framework: it records its failures in
// headers of its own choosing, the kind DLQBOT_DIALECT_HEADERS describes.
async function runInHouse() {
  const amqp = require('amqplib');
  const conn = await amqp.connect(cfg.url);
  const ch = await conn.createConfirmChannel();
  await ch.prefetch(5);
  await ch.checkQueue(cfg.queue);
  await ch.checkQueue(cfg.dlq);
  const { consumerTag } = await ch.consume(cfg.queue, (message) => {
    if (!message) return;
    const err = cfg.fail ? failure(message) : null;
    log(describe(message, err));
    if (!err) {
      ch.ack(message);
      return;
    }
    const h = { ...(message.properties.headers || {}) };
    const attempts = (Number(h['x-app-attempts']) || 0) + 1;
    h['x-app-attempts'] = attempts;
    let queue = cfg.queue;
    if (attempts >= 3) {
      queue = cfg.dlq;
      h['x-app-source'] = cfg.queue;
      h['x-app-error'] = `${err.code}: ${err.message}`;
    }
    ch.sendToQueue(queue, message.content, { ...message.properties, headers: h }, (perr) => {
      if (perr) ch.nack(message, false, true);
      else ch.ack(message);
    });
  });
  log({ event: 'ready' });
  // It stops as such a framework does: no new deliveries, then every
  // publish confirmed (and so its delivery acked) before the connection
  // closes. Closing at once would requeue a delivery already published to
  // the DLQ, and the next node would dead-letter it a second time.
  return async () => {
    await ch.cancel(consumerTag);
    await ch.waitForConfirms();
    await conn.close();
  };
}

async function main() {
  const runners = { rascal: runRascal, amqplib: runAmqplib, inhouse: runInHouse };
  const close = await runners[cfg.lib]();
  process.once('SIGTERM', async () => {
    try {
      await close();
    } finally {
      process.exit(0);
    }
  });
}

main().catch((err) => {
  log({ event: 'fatal', error: err.stack || String(err) });
  process.exit(1);
});
