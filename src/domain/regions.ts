/** The regions an instance can serve and the API groups a key can be subscribed to. */
export const REGIONS = ['eu', 'us', 'apac'] as const
export type Region = (typeof REGIONS)[number]

export const GROUPS = ['totp', 'converter'] as const
export type Group = (typeof GROUPS)[number]

/** Where each group is served: the conversion group runs in eu only. */
const GROUP_REGIONS: Record<Group, readonly Region[]> = {
  totp: REGIONS,
  converter: ['eu'],
}

/** groupServedIn tells whether an instance of `region` serves `group` at all. */
export function groupServedIn(group: Group, region: Region): boolean {
  return GROUP_REGIONS[group].includes(region)
}

export function isRegion(value: string): value is Region {
  return (REGIONS as readonly string[]).includes(value)
}

export function isGroup(value: string): value is Group {
  return (GROUPS as readonly string[]).includes(value)
}
