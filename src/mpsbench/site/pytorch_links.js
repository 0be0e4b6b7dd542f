(function () {
  var builds = JSON.parse(document.getElementById('builds').textContent);
  function find(prefix) {
    for (var hash in builds) { if (hash.indexOf(prefix) === 0) { return builds[hash]; } }
    return null;
  }
  var asked = decodeURIComponent(location.hash).replace(/^#\/\/github\.com\//, '');
  var range = asked.match(/^\.\.\/compare\/([0-9a-f]+)\.\.\.([0-9a-f]+)$/);
  var target = null;
  if (range) {
    var a = find(range[1]), b = find(range[2]);
    if (a && b && a.git && b.git) {
      target = a.git === b.git ? UPSTREAM + '/commit/' + b.git : UPSTREAM + '/compare/' + a.git + '...' + b.git;
    }
  } else if (asked) {
    var one = find(asked);
    if (one && one.git) { target = UPSTREAM + '/commit/' + one.git; }
  }
  if (target) { location.replace(target); }
  else if (asked) {
    document.getElementById('note').textContent = 'No upstream PyTorch commit is recorded for ' + asked + ': see the table.';
  }
})();
