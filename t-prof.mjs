import fs from 'node:fs'
const f = process.argv[2]
const p = JSON.parse(fs.readFileSync(f))
const self = new Map(); const byId = new Map(p.nodes.map(n => [n.id, n]))
const dt = {}; for (let i = 0; i < p.samples.length; i++) dt[p.samples[i]] = (dt[p.samples[i]] || 0) + (p.timeDeltas[i] || 0)
let total = 0
for (const n of p.nodes) { const t = dt[n.id] || 0; total += t; const k = `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.split('/').slice(-2).join('/')}:${n.callFrame.lineNumber}`; self.set(k, (self.get(k) || 0) + t) }
console.log('total ms', total / 1000)
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log((v / total * 100).toFixed(1) + '%', k)
