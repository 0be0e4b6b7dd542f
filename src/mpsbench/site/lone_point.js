/* mpsbench: a series with a single value (one build measured so far) drawn as a labelled point.
 *
 * asv's grid draws lines only, so a benchmark with one build showed an empty box; its graph page drew an
 * unlabelled dot. This flot plugin (loaded after flot, before asv's scripts) turns points on for such a
 * series and writes its value beside the point: in a grid tile with the benchmark's unit, on the graph page
 * in the y axis' own numbers and unit.
 */
(function ($) {
    "use strict";
    var LABEL = "mpsbench-lone-label";

    function only_point(series) {
        var found = null;
        for (var i = 0; i < series.data.length; ++i) {
            var point = series.data[i];
            if (point && point[1] !== null && point[1] !== undefined) {
                if (found !== null) {
                    return null;
                }
                found = point;
            }
        }
        return found;
    }

    function text_of(plot, y) {
        var id = plot.getPlaceholder().attr("id") || "";
        var json = ($.asv && $.asv.main_json) || {};
        if (id.indexOf("summarygrid-") === 0) {
            var benchmark = (json.benchmarks || {})[id.slice("summarygrid-".length)];
            return "one build: " + $.asv.pretty_unit(y, benchmark ? benchmark.unit : "");
        }
        if (id === "main-graph") {
            var axis = plot.getAxes().yaxis;
            var label = axis.options.axisLabel || "";
            return axis.tickFormatter(y, axis) + (label ? " " + label : "");
        }
        return null;  // the overview strip and other small plots: the point alone
    }

    function label(plot) {
        var placeholder = plot.getPlaceholder();
        placeholder.find("." + LABEL).remove();
        var offset = plot.getPlotOffset();
        $.each(plot.getData(), function (i, series) {
            if (!series.mpsbenchLone) {
                return;
            }
            var text = text_of(plot, series.mpsbenchLone[1]);
            if (text === null) {
                return;
            }
            var at = plot.pointOffset({x: series.mpsbenchLone[0], y: series.mpsbenchLone[1],
                                       xaxis: series.xaxis.n, yaxis: series.yaxis.n});
            var div = $("<div>").addClass(LABEL).text(text).css({
                position: "absolute", "font-size": "11px", "white-space": "nowrap", color: series.color,
                "pointer-events": "none"
            }).appendTo(placeholder);
            var left = Math.max(offset.left, Math.min(at.left - div.outerWidth() / 2,
                                                      placeholder.width() - div.outerWidth() - 2));
            var below = at.top < placeholder.height() / 2;
            div.css({left: left, top: below ? at.top + 8 : at.top - div.outerHeight() - 8});
        });
    }

    $.plot.plugins.push({
        name: "mpsbench-lone-point",
        version: "1.0",
        options: {},
        init: function (plot) {
            plot.hooks.processRawData.push(function (plot, series) {
                series.mpsbenchLone = only_point(series);
                if (series.mpsbenchLone) {
                    series.points.show = true;
                    series.points.radius = 4;
                    series.points.fill = 1;
                    series.points.fillColor = null;  // the series' own colour
                }
            });
            plot.hooks.draw.push(label);
        }
    });
})(jQuery);
