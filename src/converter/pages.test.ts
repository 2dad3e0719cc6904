import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parsePages, resolvePages } from './pages.ts'

test('page selections parse and resolve in page order, once each', () => {
  assert.deepEqual(resolvePages(parsePages('1-3,5,9-'), 10), [1, 2, 3, 5, 9, 10])
  assert.deepEqual(resolvePages(parsePages(' 5 , 1-2, 2 '), 6), [1, 2, 5])
  assert.deepEqual(resolvePages(parsePages('-2'), 6), [1, 2])
  assert.deepEqual(resolvePages(parsePages('4-'), 4), [4])
  assert.deepEqual(resolvePages(null, 3), [1, 2, 3])
})

test('bad selections are refused, and pages past the end are out of range', () => {
  for (const bad of ['', '-', 'a', '0', '3-1', '1,,2', '1-2-3', '1.5', '1;2', '9999999']) assert.equal(parsePages(bad), null, bad)
  assert.equal(resolvePages(parsePages('1-5'), 4), null)
  assert.equal(resolvePages(parsePages('5-'), 4), null)
  assert.equal(resolvePages(parsePages('7'), 4), null)
})
