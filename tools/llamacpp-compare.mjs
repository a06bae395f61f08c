// llama.cpp (through the npm package node-llama-cpp and its prebuilt CPU
// binaries) on a GGUF file: prompt processing and generation speed, and the
// teacher-forced argmax, its logit and the top-2 gap at every position of a
// text, for comparison with Tern (tools/llamacpp-compare.sh drives both; the
// suite runs it against a stand-in for node-llama-cpp,
// tests/cli/test-llamacpp-compare.sh).
//
// node tools/llamacpp-compare.mjs --nlc DIR -m MODEL [-t 2] [-p 512] [-n 128]
//      [-r 3] [--text FILE] [--positions 64] [--dump FILE] [--tokens-out FILE]
// DIR: where `npm install node-llama-cpp @node-llama-cpp/linux-x64` ran.
// --dump: "POSITION ARGMAX LOGIT TOP2_GAP INPUT_ID" per position;
// --tokens-out: the ids evaluated (BOS first when the vocabulary wants it).
import {pathToFileURL} from "node:url";
import {readFileSync, writeFileSync} from "node:fs";
import {performance} from "node:perf_hooks";

const args = {t: 2, p: 512, n: 128, r: 3, positions: 64};
for (let i = 2; i < process.argv.length; i++) {
    const a = process.argv[i].replace(/^--?/, "");
    args[a === "m" ? "model" : a] = process.argv[++i];
}
for (const k of ["t", "p", "n", "r", "positions"])
    args[k] = Number(args[k]);
if (!args.nlc || !args.model) {
    console.error("usage: node llamacpp-compare.mjs --nlc DIR -m MODEL [-t 2] [-p 512] [-n 128] [-r 3] [--text FILE]");
    process.exit(1);
}
const nlc = await import(pathToFileURL(`${args.nlc}/node_modules/node-llama-cpp/dist/index.js`).href);
const llama = await nlc.getLlama({gpu: false, build: "never", maxThreads: args.t,
                                  logLevel: nlc.LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
const ctxSize = Math.max(args.p, args.n + 1, args.positions) + 16;
const context = await model.createContext({contextSize: ctxSize, batchSize: Math.max(args.p, 512),
                                           threads: args.t, sequences: 1});
const seq = context.getSequence();
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const fmt = (v) => `${median(v).toFixed(2)} (${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)})`;

// Token ids for the speed runs: ordinary vocabulary ids, deterministic,
// inside the vocabulary (32k for Llama 2's).
const embd = model.fileInfo?.tensorInfo?.find((t) => t.name === "token_embd.weight");
const span = Math.min(50000, (embd ? Number(embd.dimensions[1]) : 51000) - 1000);
const ids = (n, seed) => Array.from({length: n}, (_, i) => 1000 + ((i * 7919 + seed * 104729) % span));

const pp = [], tg = [];
// One unmeasured warm-up of each (page faults of the mapped weights).
for (let r = -1; r < args.r; r++) {
    await seq.clearHistory();
    let t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(ids(args.p, r + 2));
    if (r >= 0)
        pp.push(args.p * 1000 / (performance.now() - t0));
    await seq.clearHistory();
    // n one-token steps from an empty context, greedy, as Tern's tg.
    let got = 0;
    t0 = performance.now();
    for await (const tok of seq.evaluate(ids(1, r + 2), {temperature: 0})) {
        void tok;
        if (++got >= args.n)
            break;
    }
    if (r >= 0)
        tg.push(args.n * 1000 / (performance.now() - t0));
}
console.log(`llama.cpp ${llama.llamaCppRelease?.release ?? "?"} (node-llama-cpp), ${args.t} threads`);
console.log(`pp${args.p}  ${fmt(pp)} tok/s`);
console.log(`tg${args.n}  ${fmt(tg)} tok/s`);

if (args.text) {
    const text = readFileSync(args.text, "utf8");
    // The window llama.cpp's perplexity tool evaluates, and so `tern-cli
    // perplexity`: the text's tokens with BOS in front when the vocabulary
    // asks for it. tokenize() never adds BOS (common_tokenize with
    // add_special false), and without it every position of a Llama 2 or
    // Gemma 3 file is compared against a different context in Tern.
    const toks = Array.from(model.tokenize(text));
    if (model.tokens.shouldPrependBosToken)
        toks.unshift(model.tokens.bos);
    toks.length = Math.min(toks.length, args.positions);
    if (args["tokens-out"])
        writeFileSync(args["tokens-out"], toks.join(" ") + "\n");
    await seq.clearHistory();
    // 64 positions per call, continuing the sequence: every call's logits
    // come back as one Map per position, and 512 positions of a 262k
    // vocabulary (Gemma 3) in one call exhaust node's heap.
    const lines = [];
    let out = [];
    for (let i = 0; i < toks.length; i++) {
        if (i % 64 === 0)
            out = await seq.controlledEvaluate(
                toks.slice(i, i + 64).map((t) => [t, {generateNext: {logits: true}}]));
        let best = -1, val = -Infinity, second = -Infinity;
        for (const [tok, l] of out[i % 64]?.next?.logits ?? new Map())
            if (l > val) {
                best = tok;
                second = val;
                val = l;
            } else if (l > second) {
                second = l;
            }
        // The top-2 gap says how firmly llama.cpp itself decides the argmax.
        lines.push(`${i} ${best} ${val.toFixed(6)} ${(val - second).toFixed(6)} ${toks[i]}`);
    }
    if (args.dump)
        writeFileSync(args.dump, lines.join("\n") + "\n");
}
await context.dispose();
await model.dispose();
