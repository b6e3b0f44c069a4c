import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkChromePolicy, isServiceManagedPolicy, type PolicySchema } from '../../src/domain/chrome-policy.js';

/**
 * chrome_policy against a small hand-made schema of the shape the installed Chromium
 * gives (name -> one of five types). Blocked policies are in the schema on purpose: the
 * block must not depend on the policy being unknown.
 */
const SCHEMA: PolicySchema = {
  BookmarkBarEnabled: 'boolean',
  DefaultPopupsSetting: 'integer',
  HomepageLocation: 'string',
  URLBlocklist: 'list',
  ManagedBookmarks: 'list',
  ContentSettingsForUrls: 'dictionary',
  // Managed by browserd, yet known to Chromium:
  ExtensionInstallForcelist: 'list',
  ExtensionSettings: 'dictionary',
  ExtensionAllowedTypes: 'list',
  ExtensionInstallBlocklist: 'list',
  BlockExternalExtensions: 'boolean',
  MandatoryExtensionsForIncognitoNavigation: 'list',
  CloudExtensionRequestEnabled: 'boolean',
  ProxyMode: 'string',
  ProxyServer: 'string',
  ProxySettings: 'dictionary',
  ProxyPacUrl: 'string',
  ProxyBypassList: 'string',
  EnableProxyOverrideRulesForAllUsers: 'integer',
  RemoteDebuggingAllowed: 'boolean',
  DeveloperToolsAvailability: 'integer',
  DeveloperToolsAvailabilityAllowlist: 'list',
  DeveloperToolsAvailabilityBlocklist: 'list',
  DeveloperToolsDisabled: 'boolean',
  PolicyTestPageEnabled: 'boolean',
  CommandLineFlagSecurityWarningsEnabled: 'boolean',
};

const check = (policy: Record<string, unknown>) => checkChromePolicy(policy, SCHEMA);

describe('checkChromePolicy: known policies of the right type pass', () => {
  test('an empty object has no problem', () => assert.deepEqual(check({}), []));
  test('one right value of each of the five types', () => {
    assert.deepEqual(
      check({
        BookmarkBarEnabled: false,
        DefaultPopupsSetting: 2,
        HomepageLocation: 'https://example.com/',
        URLBlocklist: ['example.org', '127.0.0.1:8080'],
        ContentSettingsForUrls: { a: 1 },
      }),
      [],
    );
  });
  test('edge values of the right type', () => {
    assert.deepEqual(check({ DefaultPopupsSetting: 0 }), []);
    assert.deepEqual(check({ DefaultPopupsSetting: -3 }), []);
    assert.deepEqual(check({ DefaultPopupsSetting: 2.0 }), [], '2.0 is the integer 2 in JSON');
    assert.deepEqual(check({ HomepageLocation: '' }), []);
    assert.deepEqual(check({ URLBlocklist: [] }), []);
    assert.deepEqual(check({ ManagedBookmarks: [{ name: 'x', url: 'https://x.example' }] }), []);
    assert.deepEqual(check({ ContentSettingsForUrls: {} }), []);
    assert.deepEqual(check({ BookmarkBarEnabled: true }), []);
  });
});

describe('checkChromePolicy: each type, wrong values', () => {
  const wrong: [string, string, unknown, RegExp][] = [
    ['boolean', 'BookmarkBarEnabled', 'true', /must be a boolean/],
    ['boolean', 'BookmarkBarEnabled', 1, /must be a boolean/],
    ['boolean', 'BookmarkBarEnabled', null, /must be a boolean/],
    ['integer', 'DefaultPopupsSetting', 1.5, /must be an integer/],
    ['integer', 'DefaultPopupsSetting', '2', /must be an integer/],
    ['integer', 'DefaultPopupsSetting', true, /must be an integer/],
    ['integer', 'DefaultPopupsSetting', null, /must be an integer/],
    ['integer', 'DefaultPopupsSetting', [2], /must be an integer/],
    ['string', 'HomepageLocation', 42, /must be a string/],
    ['string', 'HomepageLocation', ['https://x.example'], /must be a string/],
    ['string', 'HomepageLocation', null, /must be a string/],
    ['list', 'URLBlocklist', 'example.org', /must be a list \(JSON array\)/],
    ['list', 'URLBlocklist', { 0: 'example.org' }, /must be a list \(JSON array\)/],
    ['list', 'URLBlocklist', null, /must be a list \(JSON array\)/],
    ['dictionary', 'ContentSettingsForUrls', [], /must be a dictionary \(JSON object\)/],
    ['dictionary', 'ContentSettingsForUrls', [{ a: 1 }], /must be a dictionary \(JSON object\)/],
    ['dictionary', 'ContentSettingsForUrls', null, /must be a dictionary \(JSON object\)/],
    ['dictionary', 'ContentSettingsForUrls', 'a=1', /must be a dictionary \(JSON object\)/],
  ];
  for (const [type, name, value, message] of wrong) {
    test(`${type}: ${JSON.stringify(value)} for ${name} is refused`, () => {
      const p = check({ [name]: value });
      assert.equal(p.length, 1, JSON.stringify(p));
      assert.equal(p[0]!.field, `chrome_policy.${name}`);
      assert.match(p[0]!.message, message);
    });
  }
});

describe('checkChromePolicy: unknown policies', () => {
  for (const name of ['NoSuchPolicy', 'bookmarkbarenabled', 'BookmarkBarEnabled ', '__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    test(`${JSON.stringify(name)} is not a policy this Chromium knows`, () => {
      const policy = JSON.parse(`{${JSON.stringify(name)}: true}`) as Record<string, unknown>;
      assert.deepEqual(check(policy), [{ field: `chrome_policy.${name}`, message: 'is not a policy this Chromium knows' }]);
    });
  }
});

describe('policies browserd manages are blocked, even where Chromium knows them', () => {
  const blocked = [
    // every Extension* policy
    'ExtensionInstallForcelist',
    'ExtensionSettings',
    'ExtensionAllowedTypes',
    'ExtensionInstallBlocklist',
    'ExtensionInstallAllowlist',
    'ExtensionInstallSources',
    'ExtensionDeveloperModeSettings',
    'ExtensionSomethingFuture',
    // named extension policies
    'BlockExternalExtensions',
    'MandatoryExtensionsForIncognitoNavigation',
    'CloudExtensionRequestEnabled',
    // every Proxy* policy
    'ProxyMode',
    'ProxyServer',
    'ProxySettings',
    'ProxyPacUrl',
    'ProxyBypassList',
    'ProxyServerMode',
    'ProxyOverrideRules',
    'EnableProxyOverrideRulesForAllUsers',
    // CDP / automation
    'RemoteDebuggingAllowed',
    'DeveloperToolsAvailability',
    'DeveloperToolsAvailabilityAllowlist',
    'DeveloperToolsAvailabilityBlocklist',
    'DeveloperToolsDisabled',
    'PolicyTestPageEnabled',
    'CommandLineFlagSecurityWarningsEnabled',
  ];
  for (const name of blocked) {
    test(`${name} is blocked`, () => {
      assert.equal(isServiceManagedPolicy(name), true);
      // Blocked whatever the value, right type or not, known or not.
      for (const value of [true, 1, 'x', [], {}]) {
        const p = check({ [name]: value });
        assert.deepEqual(p, [{ field: `chrome_policy.${name}`, message: 'is managed by browserd and cannot be set per session' }], JSON.stringify(value));
      }
    });
  }

  const free = ['BookmarkBarEnabled', 'URLBlocklist', 'HomepageLocation', 'ReportExtensionsAndPluginsData', 'MaxConnectionsPerProxy', 'RemoteAccessHostFirewallTraversal', 'DefaultPopupsSetting'];
  for (const name of free) {
    test(`${name} is not managed by browserd`, () => assert.equal(isServiceManagedPolicy(name), false));
  }
  test('the prefixes are case-sensitive policy names, not substrings', () => {
    assert.equal(isServiceManagedPolicy('extensionSettings'), false);
    assert.equal(isServiceManagedPolicy('proxyMode'), false);
    assert.equal(isServiceManagedPolicy('MyProxyMode'), false);
  });
});

describe('several problems at once', () => {
  test('one problem per bad policy, each naming chrome_policy.<Name>, in the order given; good ones are not named', () => {
    const p = check({
      BookmarkBarEnabled: true,
      NoSuchPolicy: 1,
      DefaultPopupsSetting: 1.5,
      ProxyMode: 'direct',
      URLBlocklist: 'x',
      ExtensionInstallForcelist: ['abc;https://x.example'],
      HomepageLocation: 'https://example.com/',
      ContentSettingsForUrls: [],
      RemoteDebuggingAllowed: true,
    });
    assert.deepEqual(
      p.map((x) => x.field),
      [
        'chrome_policy.NoSuchPolicy',
        'chrome_policy.DefaultPopupsSetting',
        'chrome_policy.ProxyMode',
        'chrome_policy.URLBlocklist',
        'chrome_policy.ExtensionInstallForcelist',
        'chrome_policy.ContentSettingsForUrls',
        'chrome_policy.RemoteDebuggingAllowed',
      ],
    );
    assert.match(p[0]!.message, /not a policy this Chromium knows/);
    assert.match(p[1]!.message, /integer/);
    assert.match(p[2]!.message, /managed by browserd/);
    assert.match(p[3]!.message, /list/);
    assert.match(p[4]!.message, /managed by browserd/);
    assert.match(p[5]!.message, /dictionary/);
    assert.match(p[6]!.message, /managed by browserd/);
  });
  test('a blocked policy gets only the "managed" problem, not a type problem too', () => {
    assert.equal(check({ ProxySettings: 'not a dictionary' }).length, 1);
    assert.equal(check({ RemoteDebuggingAllowed: 'yes' }).length, 1);
  });
  test('an empty schema knows no policy', () => {
    assert.deepEqual(checkChromePolicy({ BookmarkBarEnabled: true }, {}), [{ field: 'chrome_policy.BookmarkBarEnabled', message: 'is not a policy this Chromium knows' }]);
  });
});
