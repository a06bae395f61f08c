// llama.cpp (node-llama-cpp prebuilt CPU) CPU time per token, 1 thread:
// pp P and N one-token steps, timed with process.cpuUsage (all threads).
import {pathToFileURL} from "node:url";
const [,, nlcDir, modelPath, P = "64", N = "32", R = "2"] = process.argv;
const nlc = await import(pathToFileURL(`${nlcDir}/node_modules/node-llama-cpp/dist/index.js`).href);
const llama = await nlc.getLlama({gpu: false, build: "never", maxThreads: 1, logLevel: nlc.LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 1024, batchSize: 512, threads: 1, sequences: 1});
const seq = context.getSequence();
const ids = (n, seed) => Array.from({length: n}, (_, i) => 1000 + ((i * 7919 + seed * 104729) % 50000));
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
for (let r = -1; r < Number(R); r++) {
    await seq.clearHistory();
    let t0 = cpu();
    await seq.evaluateWithoutGeneratingNewTokens(ids(Number(P), r + 2));
    const pp = Number(P) / (cpu() - t0);
    await seq.clearHistory();
    let got = 0;
    t0 = cpu();
    for await (const tok of seq.evaluate(ids(1, r + 2), {temperature: 0})) { void tok; if (++got >= Number(N)) break; }
    const tg = Number(N) / (cpu() - t0);
    if (r >= 0) console.log(`llama.cpp ${llama.llamaCppRelease?.release ?? "?"} pp${P} ${pp.toFixed(1)} tok/cpu-s  tg${N} ${tg.toFixed(2)} tok/cpu-s`);
}
process.exit(0);
