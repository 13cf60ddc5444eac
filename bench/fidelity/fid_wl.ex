# Fid.Wl -- the fidelity benchmark's Elixir workload (bench/fidelity/run,
# workload "excall"): the "call" workload of fid_wl.erl written as an
# Elixir GenServer, so that Elixir names ('Elixir.Fid.Wl.CallServer') are
# checked in both views. Started by fid_wl:start([excall]).
defmodule Fid.Wl do
  # fid_wl's owner calls this: the server and its clients, linked to the caller
  def start_link(iterations, counters, clients) do
    {:ok, _} = GenServer.start_link(Fid.Wl.CallServer, iterations, name: Fid.Wl.CallServer)
    for _ <- 1..clients, do: spawn_link(Fid.Wl, :call_client, [counters])
    :ok
  end

  def call_client(counters) do
    _ = GenServer.call(Fid.Wl.CallServer, :work, :infinity)
    :counters.add(counters, 1, 1)
    call_client(counters)
  end
end

defmodule Fid.Wl.CallServer do
  use GenServer
  import Bitwise

  @impl true
  def init(n), do: {:ok, n}

  # the same ~60 us in ~1500 reductions as fid_wl:call_work/2
  @impl true
  def handle_call(:work, _from, n) do
    r = call_work(n, 1)
    {:reply, r, n}
  end

  def call_work(0, acc), do: acc

  def call_work(n, a0) do
    a1 = (a0 * 31 + n) &&& 0xFFFFFF
    a2 = (a1 * 31 + n) &&& 0xFFFFFF
    a3 = (a2 * 31 + n) &&& 0xFFFFFF
    a4 = (a3 * 31 + n) &&& 0xFFFFFF
    a5 = (a4 * 31 + n) &&& 0xFFFFFF
    a6 = (a5 * 31 + n) &&& 0xFFFFFF
    a7 = (a6 * 31 + n) &&& 0xFFFFFF
    a8 = (a7 * 31 + n) &&& 0xFFFFFF
    a9 = (a8 * 31 + n) &&& 0xFFFFFF
    a10 = (a9 * 31 + n) &&& 0xFFFFFF
    a11 = (a10 * 31 + n) &&& 0xFFFFFF
    a12 = (a11 * 31 + n) &&& 0xFFFFFF
    a13 = (a12 * 31 + n) &&& 0xFFFFFF
    a14 = (a13 * 31 + n) &&& 0xFFFFFF
    a15 = (a14 * 31 + n) &&& 0xFFFFFF
    a16 = (a15 * 31 + n) &&& 0xFFFFFF
    call_work(n - 1, a16)
  end
end
