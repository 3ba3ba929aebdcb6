"""One runnable example per public op of the math, special-function and activation rows (the
format of kernels/op_examples.py, which kernels/surface.py merges this table into).  Values
written by running each call once, checked against PyTorch; tests/test_op_docstrings.py runs them.
"""

EXAMPLES = {  # public name -> ">>> call\nexpected repr"
    'celu': '>>> dj.celu(dj.tensor([-1.0, 2.0]), alpha=2.0)\ntensor([-0.7869,  2.0000])',
    'deg2rad': '>>> dj.deg2rad(dj.tensor([180.0, 90.0]))\ntensor([3.1416, 1.5708])',
    'digamma': '>>> dj.digamma(dj.tensor([1.0, 0.5]))\ntensor([-0.5772, -1.9635])',
    'erfc': '>>> dj.erfc(dj.tensor([0.0, 1.0]))\ntensor([1.0000, 0.1573])',
    'erfinv': '>>> dj.erfinv(dj.tensor([0.0, 0.5, 1.0]))\ntensor([0.0000, 0.4769,    inf])',
    'exp2': '>>> dj.exp2(dj.tensor([0.0, 3.0]))\ntensor([1., 8.])',
    'float_power': '>>> dj.float_power(dj.tensor([2, 3]), 2)\ntensor([4., 9.], dtype=dj.float64)',
    'fmax': ">>> dj.fmax(dj.tensor([1.0, float('nan')]), dj.tensor([float('nan'), 2.0]))\ntensor([1., 2.])",
    'fmin': ">>> dj.fmin(dj.tensor([1.0, float('nan')]), dj.tensor([float('nan'), 2.0]))\ntensor([1., 2.])",
    'fmod': '>>> dj.fmod(dj.tensor([-7, 7]), dj.tensor([3, 3]))\ntensor([-1,  1])',
    'frac': '>>> dj.frac(dj.tensor([1.5, -2.25]))\ntensor([ 0.5000, -0.2500])',
    'gcd': '>>> dj.gcd(dj.tensor([12, 7]), dj.tensor([18, 0]))\ntensor([6, 7])',
    'hardshrink': '>>> dj.hardshrink(dj.tensor([-1.0, 0.25]))\ntensor([-1.,  0.])',
    'heaviside': '>>> dj.heaviside(dj.tensor([-2.0, 0.0, 3.0]), dj.tensor([0.5]))\ntensor([0.0000, 0.5000, 1.0000])',
    'i0': '>>> dj.i0(dj.tensor([0.0, 1.0]))\ntensor([1.0000, 1.2661])',
    'isneginf': ">>> dj.isneginf(dj.tensor([-float('inf'), 1.0]))\ntensor([ True, False])",
    'isposinf': ">>> dj.isposinf(dj.tensor([float('inf'), 1.0]))\ntensor([ True, False])",
    'isreal': '>>> dj.isreal(dj.tensor([1.0, 2.0]))\ntensor([True, True])',
    'lcm': '>>> dj.lcm(dj.tensor([4, 6]), dj.tensor([6, 4]))\ntensor([12, 12])',
    'ldexp': '>>> dj.ldexp(dj.tensor([1.0, 3.0]), dj.tensor([2, -1]))\ntensor([4.0000, 1.5000])',
    'lgamma': '>>> dj.lgamma(dj.tensor([0.5, 3.0]))\ntensor([0.5724, 0.6931])',
    'logaddexp2': '>>> dj.logaddexp2(dj.tensor([1.0, 0.0]), dj.tensor([1.0, 3.0]))\ntensor([2.0000, 3.1699])',
    'positive': '>>> dj.positive(dj.tensor([-1, 2]))\ntensor([-1,  2])',
    'rad2deg': '>>> dj.rad2deg(dj.tensor([3.141592653589793]))\ntensor([180.])',
    'selu': '>>> dj.selu(dj.tensor([-1.0, 1.0]))\ntensor([-1.1113,  1.0507])',
    'sgn': '>>> dj.sgn(dj.tensor([-2.0, 0.0, 3.0]))\ntensor([-1.,  0.,  1.])',
    'sinc': '>>> dj.sinc(dj.tensor([0.0, 0.5]))\ntensor([1.0000, 0.6366])',
    'threshold': '>>> dj.threshold(dj.tensor([0.5, 2.0]), threshold=1.0, value=-1.0)\ntensor([-1.,  2.])',
}
