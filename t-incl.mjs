import fs from 'node:fs'
const [f, n] = [process.argv[2], Number(process.argv[3])]
const p = JSON.parse(fs.readFileSync(f))
const byId = new Map(p.nodes.map(x => [x.id, x]))
const parent = new Map(); for (const x of p.nodes) for (const c of x.children || []) parent.set(c, x.id)
const dt = new Map(); for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) || 0) + (p.timeDeltas[i] || 0))
const incl = new Map()
for (const [id, t] of dt) {
  const seen = new Set(); let cur = id
  while (cur !== undefined) { const x = byId.get(cur); const k = `${x.callFrame.functionName || '(anon)'} ${x.callFrame.url.split('/').slice(-2).join('/')}:${x.callFrame.lineNumber}`; if (!seen.has(k)) { seen.add(k); incl.set(k, (incl.get(k) || 0) + t) } cur = parent.get(cur) }
}
for (const [k, v] of [...incl].filter(([k]) => /src\/|fastify|content-type|route|hooks|reply|fields|records|querystring|gateway|cache|connections/.test(k)).sort((a, b) => b[1] - a[1]).slice(0, 45)) console.log((v / n).toFixed(2).padStart(7), 'µs/req', k)
