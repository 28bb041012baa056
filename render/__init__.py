"""Viewers of MAPF-FrozenLake: the pygame replay window, headless image export, and the Textual apps.

Commands (``render.cli``): ``mapf-lake watch PATH`` (window; ``--terminal``; ``--png``/``--gif``/``--svg``/``--mp4``),
``mapf-lake play`` (Textual), ``mapf-lake bench render``.

One file per role:

* ``colors``: the palette; ``timeline``: scenes and failure markers read from a trace; ``source``: replay
  files behind one episode index, and the panel's facts; ``completion``: the model's text, wrapped and
  synchronised with the step shown; ``watch_state``: the viewer's state (shared by window and terminal);
* ``draw``: pygame drawing of one frame onto any surface; ``viewer``: the window loop; ``export``: PNG, GIF and
  MP4 (frames drawn by ``draw``); ``svg``: the episode as one animated SVG (no pygame);
* ``term``: the board and the completion as Rich text; ``game``: a hand-played game around ``MapfEnv``;
  ``play_app`` and ``watch_app``: the Textual apps; ``bench``: the figures.

Nothing here holds a game rule: positions, status and events come from replays or from ``simulator.env``,
outcomes from ``simulator.judge``. pygame and Textual are imported only by the modules that draw with them.
"""
