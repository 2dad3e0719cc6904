import { test } from 'node:test'
import assert from 'node:assert/strict'
import { pagesLabel, parsePages, resolvePages } from './pages.ts'

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

test("a split's part is named by its pages, runs joined by _, or by its number when they are too scattered", () => {
  assert.equal(pagesLabel([1, 2, 3], 1), 'pages-1-3')
  assert.equal(pagesLabel([5], 2), 'pages-5')
  assert.equal(pagesLabel([1, 2, 3, 5, 7, 8], 1), 'pages-1-3_5_7-8')
  assert.equal(pagesLabel([], 4), 'part-4')
  assert.equal(
    pagesLabel(
      Array.from({ length: 30 }, (_, i) => 2 * i + 1),
      3,
    ),
    'part-3',
  )
})
