// One agent-like run end to end: submit, a worker claims it, begins a turn,
// calls a tool, records the model's usage, checkpoints and completes.
//
//   RUNQ_DATABASE_URL=postgresql://... node dist/examples/agent.js
//
// The database must have runq deployed (sql/runq.sql or sqitch).

import { Client, runWorker, type RunContext } from "../src/index.js";

const url = process.env.RUNQ_DATABASE_URL;
if (url === undefined || url === "") throw new Error("set RUNQ_DATABASE_URL");

const KIND = "example.agent";

// A stand-in for a model call and a tool: the point is what is written around them.
async function agent(ctx: RunContext): Promise<unknown> {
  const question = String(ctx.payload.question);
  await ctx.beginTurn(); // before the chargeable model call: the budget gate
  const callId = `search-${ctx.runId}`;
  await ctx.beginTool(callId, "search", "read_only", { query: question });
  const hits = [`a page about ${question}`];
  await ctx.endTool(callId, { hits });
  await ctx.recordUsage({ input_tokens: 1200, output_tokens: 310, cost_usd: "0.0123" });
  await ctx.checkpoint({ turn: 1, hits });
  return { answer: `found ${hits.length} page(s) about ${question}` };
}

const client = Client.connect(url);
try {
  const { runId, outcome } = await client.submit("example", KIND, {
    payload: { question: "durable queues" }, sessionId: `example-${process.pid}`, priority: 0,
    budget: { cost_usd: "1.00" }, timeout: 60_000,
  });
  console.log(`submitted run ${runId} (${outcome})`);

  const stop = new AbortController();
  const worker = runWorker({
    client, classes: [0], kinds: [KIND], workerId: `example-${process.pid}`,
    handler: agent, lease: 30_000, pollMs: 100, signal: stop.signal,
  });
  let run = await client.getRun(runId);
  while (run.status === "queued" || run.status === "running") {
    await new Promise((resolve) => setTimeout(resolve, 100));
    run = await client.getRun(runId);
  }
  stop.abort();
  await worker;

  console.log(`status: ${run.status}`);
  console.log(`result: ${JSON.stringify(run.result)}`);
  console.log(`usage: ${JSON.stringify(run.usage)}`);
  for (const event of await client.runEvents(runId)) {
    console.log(`  epoch ${event.epoch}  ${event.type}`);
  }
  if (run.status !== "succeeded") process.exitCode = 1;
} finally {
  await client.close();
}
