import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parseForm } from './fields.ts'

const form = (text: string) => ({ ...parseForm(Buffer.from(text, 'latin1')) })

test('parseForm: plain bodies and escaped ones decode alike; undecodable text is marked, never replaced', () => {
  assert.deepEqual(form('secret=JBSW+Y3DP&token=123456&empty=&bare'), { secret: 'JBSW Y3DP', token: '123456', empty: '', bare: '' })
  assert.deepEqual(form('secret=JBSW%20Y3DP&token=%31%32'), { secret: 'JBSW Y3DP', token: '12' })
  assert.deepEqual(form('a=caf%C3%A9&b=caf\xc3\xa9&c=a%2Bb+c'), { a: 'café', b: 'café', c: 'a+b c' })
  assert.deepEqual(form('a=1&a=2'), { a: ['1', '2'] })
  assert.deepEqual(form('a=%zz%2'), { a: '%zz%2' }, 'a broken escape is kept as text')
  for (const bad of ['a=%ED%A0%80', 'a=\xff', 'a=%C3']) assert.equal((form(bad).a as string).isWellFormed(), false, bad)
})
