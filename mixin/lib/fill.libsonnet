// Fills the placeholders that `python -m mixin` leaves in the shipped rules and dashboards
// with the values of _config: the selector, the thresholds, the runbooks' address and the
// dashboards' uid prefix. With the default _config the result is the shipped YAML and JSON.
{
  fill(config, value)::
    local selector = config.actionschedulerSelector;
    local text(s) =
      local scoped = std.strReplace(
        std.strReplace(s, '{__SCOPE__}', if selector == '' then '' else '{' + selector + '}'),
        '{__SCOPE__,',
        if selector == '' then '{' else '{' + selector + ',',
      );
      local thresholds = std.foldl(
        function(acc, key)
          std.strReplace(acc, '__THRESHOLD_' + key + '__', std.toString(config.thresholds[key])),
        std.objectFields(config.thresholds),
        scoped,
      );
      std.strReplace(
        std.strReplace(thresholds, '__RUNBOOKS__', config.runbookURLPrefix),
        '__UID_PREFIX__',
        config.dashboardUidPrefix,
      );
    local walk(v) =
      if std.isString(v) then text(v)
      else if std.isArray(v) then std.map(walk, v)
      else if std.isObject(v) then { [key]: walk(v[key]) for key in std.objectFields(v) }
      else v;
    walk(value),
}
